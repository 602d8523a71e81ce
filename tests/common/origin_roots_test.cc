// The two forms of a file:// origin root (a root of namespaces, a shared root), and whose a uri
// beneath one is, as the cache node and the operator both judge it.
#include "common/origin_roots.h"

#include <gtest/gtest.h>

namespace granary {
namespace {

std::vector<OriginRoot> roots(const std::vector<std::string>& texts) {
  auto parsed = parseOriginRoots(texts, "checkpointOriginRoots");
  EXPECT_TRUE(parsed.isOk()) << parsed.status().message();
  return parsed.isOk() ? *parsed : std::vector<OriginRoot>{};
}

TEST(OriginRoots, ParsesBothForms) {
  auto ofNamespaces = parseOriginRoot("/srv/ckpt/{namespace}");
  ASSERT_TRUE(ofNamespaces.isOk()) << ofNamespaces.status().message();
  EXPECT_FALSE(ofNamespaces->shared);
  EXPECT_EQ(ofNamespaces->before, "/srv/ckpt");
  EXPECT_EQ(ofNamespaces->after, "");
  EXPECT_EQ(ofNamespaces->directoryOf("team-a"), "/srv/ckpt/team-a");

  auto deeper = parseOriginRoot("/home/{namespace}/ckpt/runs/");
  ASSERT_TRUE(deeper.isOk()) << deeper.status().message();
  EXPECT_EQ(deeper->before, "/home");
  EXPECT_EQ(deeper->after, "ckpt/runs");
  EXPECT_EQ(deeper->directoryOf("team-a"), "/home/team-a/ckpt/runs");

  auto shared = parseOriginRoot("shared:/mnt/corpus/");
  ASSERT_TRUE(shared.isOk()) << shared.status().message();
  EXPECT_TRUE(shared->shared);
  EXPECT_EQ(shared->before, "/mnt/corpus");
  EXPECT_EQ(shared->directoryOf("team-b"), "/mnt/corpus");
}

TEST(OriginRoots, RefusesRootsThatDoNotSayWhoseTheyAre) {
  for (const char* bad : {"/srv/ckpt", "srv/{namespace}", "/{namespace}", "/srv/x{namespace}",
                          "/srv/{namespace}/{namespace}", "shared:/srv/{namespace}", "shared:/",
                          "/srv/../{namespace}", "shared:relative"}) {
    const auto parsed = parseOriginRoot(bad);
    ASSERT_FALSE(parsed.isOk()) << bad;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << bad;
    // Every refusal shows both forms, so the fix is in the message.
    EXPECT_NE(parsed.status().message().find("{namespace}"), std::string::npos);
    EXPECT_NE(parsed.status().message().find("shared:"), std::string::npos);
  }
  const auto listed = parseOriginRoots({"shared:/a", "/srv/ckpt"}, "fileOriginRoots");
  ASSERT_FALSE(listed.isOk());
  EXPECT_NE(listed.status().message().find("fileOriginRoots[1]"), std::string::npos)
      << listed.status().message();
}

TEST(OriginRoots, ANamespaceUsesOnlyItsOwnDirectoryOfARootOfNamespaces) {
  const auto r = roots({"/srv/ckpt/{namespace}"});
  const std::string option = "checkpointOriginRoots";
  EXPECT_TRUE(checkUnderRoots("u", "/srv/ckpt/team-a", "team-a", r, option).isOk());
  EXPECT_TRUE(checkUnderRoots("u", "/srv/ckpt/team-a/run1/", "team-a", r, option).isOk());

  const Status other =
      checkUnderRoots("file:///srv/ckpt/team-a/run1/", "/srv/ckpt/team-a/run1/", "team-b", r,
                      option);
  EXPECT_EQ(other.code(), StatusCode::kPermissionDenied);
  for (const char* said : {"uri: file:///srv/ckpt/team-a/run1/", "namespace team-b",
                           "/srv/ckpt/{namespace}", "/srv/ckpt/team-b/",
                           "cacheNode.checkpointOriginRoots"})
    EXPECT_NE(other.message().find(said), std::string::npos) << said << " in " << other.message();

  // ".." is folded before the comparison; above the namespaces' directories is no one's.
  EXPECT_EQ(checkUnderRoots("u", "/srv/ckpt/team-b/../team-a/x", "team-b", r, option).code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(checkUnderRoots("u", "/srv/ckpt", "team-b", r, option).code(),
            StatusCode::kPermissionDenied);
  // A prefix of a name is not the name: team-a's directory does not hold team-ab's.
  EXPECT_EQ(checkUnderRoots("u", "/srv/ckpt/team-ab", "team-a", r, option).code(),
            StatusCode::kPermissionDenied);
  // Something that is no namespace's name has no directory.
  EXPECT_FALSE(checkUnderRoots("u", "/srv/ckpt/..", "..", r, option).isOk());
  EXPECT_FALSE(checkUnderRoots("u", "/srv/ckpt", "", r, option).isOk());
}

TEST(OriginRoots, ASharedRootServesEveryNamespace) {
  const auto r = roots({"/srv/ckpt/{namespace}", "shared:/mnt/corpus"});
  EXPECT_TRUE(checkUnderRoots("u", "/mnt/corpus/imagenet", "team-a", r, "fileOriginRoots").isOk());
  EXPECT_TRUE(checkUnderRoots("u", "/mnt/corpus/imagenet", "team-b", r, "fileOriginRoots").isOk());
  EXPECT_TRUE(checkUnderRoots("u", "/mnt/corpus", "", r, "fileOriginRoots").isOk());
}

TEST(OriginRoots, OutsideEveryRootOrWithoutRootsIsInvalidNamingTheOption) {
  const auto r = roots({"/srv/ckpt/{namespace}", "shared:/mnt/corpus"});
  const Status outside = checkUnderRoots("file:///etc/", "/etc/", "team-a", r, "fileOriginRoots");
  EXPECT_EQ(outside.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(outside.message().find("outside the cache node's fileOriginRoots "
                                   "(/srv/ckpt/{namespace}, shared:/mnt/corpus)"),
            std::string::npos)
      << outside.message();
  // "/mnt/corpus2" is beside the root, not in it.
  EXPECT_EQ(checkUnderRoots("u", "/mnt/corpus2", "team-a", r, "fileOriginRoots").code(),
            StatusCode::kInvalidArgument);
  const Status none = checkUnderRoots("file:///srv/", "/srv/", "team-a", {}, "fileOriginRoots");
  EXPECT_EQ(none.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.message().find("cacheNode.fileOriginRoots"), std::string::npos);
}

TEST(OriginRoots, LexicalHelpers) {
  EXPECT_EQ(lexicallyNormal("/a/./b//c/../d/"), "/a/b/d");
  EXPECT_EQ(lexicallyNormal("/../.."), "/");
  EXPECT_TRUE(isPathWithin("/data/x", "/data"));
  EXPECT_TRUE(isPathWithin("/data", "/data"));
  EXPECT_FALSE(isPathWithin("/data2", "/data"));
  EXPECT_TRUE(isNamespaceName("team-a"));
  EXPECT_FALSE(isNamespaceName("Team"));
  EXPECT_FALSE(isNamespaceName("-a"));
  EXPECT_FALSE(isNamespaceName(std::string(64, 'a')));
}

}  // namespace
}  // namespace granary

// granary-cache-node processes on loopback: real gRPC between them, a real web server as the
// origin, kill -9 and restart.
#include "tests/support/cache_node_process.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "csi/v1/csi.grpc.pb.h"
#include "granary/v1/cache_node.grpc.pb.h"
#include "tests/support/eventually.h"
#include "tests/support/fake_nvml_scenario.h"
#include "tests/support/http_file_server.h"
#include "tests/support/http_get.h"
#include "tests/support/mount_readers.h"
#include "tests/support/s3rver.h"
#include "tests/support/scratch_tree.h"
#include "tests/support/test_certificates.h"

namespace granary::cache {
namespace {

using namespace std::chrono_literals;

using testing::eventually;
using testing::freePort;
using testing::KeeperProcess;
using testing::kToken;
using testing::NodeProcess;
using testing::publishVolume;
using testing::Readers;
using testing::removeTree;
using testing::rootOfNamespaces;
using testing::sharedRoot;
using testing::unpublishVolume;

// The mount ID the kernel gave the mount at `point` (-1 if none): the same ID means the same
// mount, not a new one at the same place.
// This process's name as the kernel keeps it (/proc/self/comm, at most 15 characters).
std::string processName() {
  std::string name;
  std::getline(std::ifstream("/proc/self/comm"), name);
  return name;
}

int mountIdOf(const std::filesystem::path& point) {
  std::ifstream info("/proc/self/mountinfo");
  for (std::string line; std::getline(info, line);) {
    std::istringstream fields(line);
    int id, parent;
    std::string device, root, mountPoint;
    fields >> id >> parent >> device >> root >> mountPoint;
    if (mountPoint == point.string()) return id;
  }
  return -1;
}

std::unique_ptr<grpc::ClientContext> authorized(const std::string& token = kToken) {
  auto context = std::make_unique<grpc::ClientContext>();
  if (!token.empty()) context->AddMetadata("authorization", "Bearer " + token);
  context->set_deadline(std::chrono::system_clock::now() + 30s);
  return context;
}

class CacheNodeProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("granary-nodes-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    removeTree(root_);
    std::filesystem::create_directories(root_ / "origin");
    std::mt19937 random(7);
    for (int i = 0; i < 24; ++i) {
      std::string data(2000 + 911 * i, '\0');
      for (auto& c : data) c = static_cast<char>(random());
      write("train/part-" + std::to_string(i) + ".bin", data);
    }
    std::string big(5 << 20, '\0');
    for (auto& c : big) c = static_cast<char>(random());
    write("big/blob.bin", big);
    auto server = testing::HttpFileServer::start(root_ / "origin");
    ASSERT_TRUE(server.isOk()) << server.status();
    origin_ = std::move(*server);
  }
  void TearDown() override {
    nodes_.clear();
    origin_.reset();
    removeTree(root_);  // and the mounts a killed node left
  }

  void write(const std::string& path, const std::string& data) {
    std::filesystem::create_directories((root_ / "origin" / path).parent_path());
    std::ofstream(root_ / "origin" / path, std::ios::binary) << data;
    files_[path] = data;
  }
  int64_t datasetBytes() const {
    int64_t total = 0;
    for (const auto& [_, data] : files_) total += static_cast<int64_t>(data.size());
    return total;
  }

  NodeProcess& addNode(const std::string& name, const testing::TestCertificates* tls = nullptr,
                       const std::string& keeperSocket = "") {
    nodes_.push_back(std::make_unique<NodeProcess>(root_ / name, name, tls, keeperSocket));
    nodes_.back()->start();
    return *nodes_.back();
  }

  v1::EnsureDatasetRequest ensureRequest(int64_t bandwidth = 0) const {
    v1::EnsureDatasetRequest request;
    request.mutable_dataset()->set_namespace_("ml");
    request.mutable_dataset()->set_name("coco");
    request.mutable_dataset()->set_generation(1);
    request.mutable_dataset()->set_uid("uid-1");
    request.add_mounts()->mutable_source()->set_uri(origin_->url());
    request.mutable_cache()->set_replicas(1);
    request.mutable_cache()->set_chunk_size_bytes(1 << 20);
    request.mutable_cache()->set_bandwidth_limit_bytes_per_second(bandwidth);
    for (const auto& node : nodes_) {
      auto* endpoint = request.add_node_set();
      endpoint->set_node_name(node->name());
      endpoint->set_address(node->address());
    }
    return request;
  }

  // ensureRequest() of the S3 test server's `uri`, with its credentials.
  v1::EnsureDatasetRequest ensureBucketRequest(const S3rver& bucket, const std::string& uri) const {
    v1::EnsureDatasetRequest request = ensureRequest();
    v1::Mount& mount = *request.mutable_mounts(0);
    mount.mutable_source()->set_uri(uri);
    mount.mutable_source()->set_endpoint(bucket.endpoint());
    mount.mutable_credentials()->set_access_key_id("S3RVER");
    mount.mutable_credentials()->set_secret_access_key("S3RVER");
    return request;
  }

  static v1::DatasetStatus statusOf(NodeProcess& node) {
    v1::GetDatasetStatusRequest request;
    request.mutable_dataset()->set_namespace_("ml");
    request.mutable_dataset()->set_name("coco");
    v1::DatasetStatus status;
    const grpc::Status rpc = node.api().GetDatasetStatus(authorized().get(), request, &status);
    EXPECT_TRUE(rpc.ok()) << rpc.error_message();
    return status;
  }

  // Follows the node's progress stream until `done` holds (or 30 s pass); the last status.
  static v1::DatasetStatus watchUntil(NodeProcess& node,
                                      const std::function<bool(const v1::DatasetStatus&)>& done) {
    v1::WatchProgressRequest watch;
    watch.mutable_dataset()->set_namespace_("ml");
    watch.mutable_dataset()->set_name("coco");
    watch.mutable_interval()->set_nanos(100'000'000);  // the server's shortest
    auto context = authorized();
    auto stream = node.api().WatchProgress(context.get(), watch);
    v1::DatasetStatus status;
    while (stream->Read(&status) && !done(status)) {
    }
    context->TryCancel();
    (void)stream->Finish();
    return status;
  }

  static v1::DatasetStatus waitReady(NodeProcess& node) {
    return watchUntil(node, [](const v1::DatasetStatus& s) {
      return s.phase() == v1::DATASET_PHASE_READY || s.phase() == v1::DATASET_PHASE_FAILED ||
             s.phase() == v1::DATASET_PHASE_DEGRADED;
    });
  }

  // Asks `node` for the refresh `refresh` until it is no longer running (30 s at most); the last
  // answer.
  static v1::RefreshDatasetResponse refreshUntilDone(NodeProcess& node,
                                                     const v1::RefreshDatasetRequest& refresh) {
    v1::RefreshDatasetResponse answer;
    EXPECT_TRUE(testing::eventually(
        [&] {
          return node.api().RefreshDataset(authorized().get(), refresh, &answer).ok() &&
                 answer.state() != v1::RefreshDatasetResponse::STATE_RUNNING;
        },
        std::chrono::seconds(30)))
        << answer.ShortDebugString();
    return answer;
  }

  // A kubelet's NodePublishVolume of an inline volume with `attributes` at `target`.
  static csi::v1::NodePublishVolumeRequest csiPublishRequest(
      const std::filesystem::path& target, const std::string& podNamespace,
      std::map<std::string, std::string> attributes) {
    csi::v1::NodePublishVolumeRequest request;
    request.set_volume_id("csi-" + target.parent_path().parent_path().filename().string());
    request.set_target_path(target.string());
    request.mutable_volume_capability()->mutable_mount();
    request.mutable_volume_capability()->mutable_access_mode()->set_mode(
        csi::v1::VolumeCapability::AccessMode::SINGLE_NODE_WRITER);
    attributes["csi.storage.k8s.io/ephemeral"] = "true";
    attributes["csi.storage.k8s.io/pod.namespace"] = podNamespace;
    attributes["csi.storage.k8s.io/pod.name"] = "worker-0";
    attributes["csi.storage.k8s.io/pod.uid"] = "0f3c1a2b-1111-2222-3333-444455556666";
    request.mutable_volume_context()->insert(attributes.begin(), attributes.end());
    return request;
  }

  static bool canMount() { return ::geteuid() == 0 && ::access("/dev/fuse", R_OK | W_OK) == 0; }

  // Ensures ml/coco on `node` and waits until it is Ready.
  bool ensureReady(NodeProcess& node) const {
    v1::EnsureDatasetResponse ensured;
    return node.api().EnsureDataset(authorized().get(), ensureRequest(), &ensured).ok() &&
           waitReady(node).phase() == v1::DATASET_PHASE_READY;
  }

  // Reads a whole file through the node's Read stream, counting bytes by source.
  static std::string readFile(NodeProcess& node, const std::string& path,
                              std::map<v1::ReadSource, int64_t>* sources = nullptr,
                              int64_t generation = 0) {
    v1::ReadRequest request;
    request.mutable_dataset()->set_namespace_("ml");
    request.mutable_dataset()->set_name("coco");
    request.mutable_dataset()->set_generation(generation);
    request.set_path(path);
    request.set_length(-1);
    auto context = authorized();
    auto reader = node.api().Read(context.get(), request);
    std::string data;
    v1::ReadResponse piece;
    while (reader->Read(&piece)) {
      EXPECT_EQ(piece.offset(), static_cast<int64_t>(data.size()));
      data += piece.data();
      if (sources) (*sources)[piece.source()] += static_cast<int64_t>(piece.data().size());
    }
    const grpc::Status status = reader->Finish();
    EXPECT_TRUE(status.ok()) << path << ": " << status.error_message();
    return data;
  }

  std::filesystem::path root_;
  std::unique_ptr<testing::HttpFileServer> origin_;
  std::map<std::string, std::string> files_;
  std::vector<std::unique_ptr<NodeProcess>> nodes_;
};

TEST_F(CacheNodeProcessTest, AViewServesItsSourcesBytesAndPurgingItKeepsThem) {
  write("views/a.bin", std::string(3000, 'a'));
  write("views/b.bin", std::string(5000, 'b'));
  write("other/c.bin", std::string(700, 'c'));
  NodeProcess& node = addNode("n1");
  const auto viewOf = [](const std::string& name, const std::string& path) {
    v1::EnsureDatasetRequest request;
    request.mutable_dataset()->set_namespace_("team");
    request.mutable_dataset()->set_name(name);
    request.mutable_dataset()->set_generation(1);
    request.mutable_view()->mutable_source()->set_namespace_("ml");
    request.mutable_view()->mutable_source()->set_name("coco");
    request.mutable_view()->set_path(path);
    return request;
  };
  v1::EnsureDatasetResponse response;
  EXPECT_EQ(node.api()
                .EnsureDataset(authorized().get(), viewOf("train", "views"), &response)
                .error_code(),
            grpc::StatusCode::NOT_FOUND)
      << "no view of a dataset the node does not hold";
  ASSERT_TRUE(ensureReady(node));
  const int64_t originBytes = origin_->bytesServed();
  ASSERT_TRUE(
      node.api().EnsureDataset(authorized().get(), viewOf("train", "views"), &response).ok());
  EXPECT_EQ(response.status().dataset().name(), "coco") << "a view answers with its source";
  const grpc::Status escapes =
      node.api().EnsureDataset(authorized().get(), viewOf("up", "views/../.."), &response);
  EXPECT_EQ(escapes.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(escapes.error_message().find("view.path"), std::string::npos);

  v1::ListDirectoryRequest list;
  list.mutable_dataset()->set_namespace_("team");
  list.mutable_dataset()->set_name("train");
  v1::ListDirectoryResponse listed;
  ASSERT_TRUE(node.api().ListDirectory(authorized().get(), list, &listed).ok());
  std::vector<std::string> names;
  for (const auto& e : listed.entries()) names.push_back(e.path());
  EXPECT_EQ(names, (std::vector<std::string>{"a.bin", "b.bin"}));
  v1::ReadRequest read;
  read.mutable_dataset()->set_namespace_("team");
  read.mutable_dataset()->set_name("train");
  read.set_path("b.bin");
  read.set_length(-1);
  auto context = authorized();
  auto reader = node.api().Read(context.get(), read);
  std::string data;
  for (v1::ReadResponse piece; reader->Read(&piece);) data += piece.data();
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(data, files_["views/b.bin"]);
  read.set_path("../other/c.bin");
  auto outsideContext = authorized();
  auto outside = node.api().Read(outsideContext.get(), read);
  for (v1::ReadResponse piece; outside->Read(&piece);) ADD_FAILURE() << "read outside the view";
  EXPECT_FALSE(outside->Finish().ok());

  v1::PurgeDatasetRequest purge;
  *purge.mutable_dataset() = viewOf("train", "").dataset();
  purge.set_all_generations(true);
  v1::PurgeDatasetResponse purged;
  ASSERT_TRUE(node.api().PurgeDataset(authorized().get(), purge, &purged).ok());
  EXPECT_EQ(purged.freed_bytes(), 0);
  EXPECT_EQ(statusOf(node).progress().cached_bytes(), datasetBytes())
      << "the source keeps its bytes";
  EXPECT_EQ(readFile(node, "views/a.bin"), files_["views/a.bin"]);
  EXPECT_EQ(origin_->bytesServed(), originBytes) << "a view reads nothing from the origin";
}

TEST_F(CacheNodeProcessTest, TwoDatasetsOfTheSameSourceHoldOneCopyAndEitherMayGo) {
  NodeProcess& node = addNode("n1");
  ASSERT_TRUE(ensureReady(node));
  const int64_t originBytes = origin_->bytesServed();
  // Another team's Dataset of the same origin, listed with its own request.
  auto request = ensureRequest();
  request.mutable_dataset()->set_namespace_("team");
  request.mutable_dataset()->set_uid("uid-2");
  v1::EnsureDatasetResponse response;
  ASSERT_TRUE(node.api().EnsureDataset(authorized().get(), request, &response).ok());
  v1::GetDatasetStatusRequest other;
  *other.mutable_dataset() = request.dataset();
  v1::DatasetStatus status;
  ASSERT_TRUE(eventually([&] {
    return node.api().GetDatasetStatus(authorized().get(), other, &status).ok() &&
           status.phase() == v1::DATASET_PHASE_READY;
  }));
  EXPECT_EQ(status.progress().cached_bytes(), datasetBytes()) << "its own share, all of it";
  EXPECT_EQ(origin_->bytesServed(), originBytes) << "the origin is not read again";
  // Every chunk file is one inode with two names: one copy on disk.
  int64_t names = 0, onDisk = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root_ / "n1" / "cache")) {
    if (!entry.is_regular_file()) continue;
    ++names;
    EXPECT_EQ(entry.hard_link_count(), 2u) << entry.path();
    onDisk += static_cast<int64_t>(entry.file_size());
  }
  EXPECT_GT(names, 0);
  EXPECT_EQ(onDisk, 2 * datasetBytes()) << "each name's size; the blocks are shared";
  // Other credentials for the same origin share nothing: they read the origin themselves.
  auto stranger = ensureRequest();
  stranger.mutable_dataset()->set_namespace_("stranger");
  stranger.mutable_dataset()->set_uid("uid-3");
  stranger.mutable_mounts(0)->mutable_credentials()->set_bearer_token("another-token");
  ASSERT_TRUE(node.api().EnsureDataset(authorized().get(), stranger, &response).ok());
  *other.mutable_dataset() = stranger.dataset();
  ASSERT_TRUE(eventually([&] {
    return node.api().GetDatasetStatus(authorized().get(), other, &status).ok() &&
           status.phase() == v1::DATASET_PHASE_READY;
  }));
  EXPECT_EQ(origin_->bytesServed(), originBytes + datasetBytes());
  v1::PurgeDatasetRequest purge;
  *purge.mutable_dataset() = stranger.dataset();
  purge.set_all_generations(true);
  v1::PurgeDatasetResponse purged;
  ASSERT_TRUE(node.api().PurgeDataset(authorized().get(), purge, &purged).ok());

  // The first Dataset goes: the other still reads every byte, from its own names.
  *purge.mutable_dataset() = ensureRequest().dataset();
  ASSERT_TRUE(node.api().PurgeDataset(authorized().get(), purge, &purged).ok());
  for (const auto& [path, data] : files_) {
    v1::ReadRequest read;
    *read.mutable_dataset() = request.dataset();
    read.set_path(path);
    read.set_length(-1);
    auto context = authorized();
    auto reader = node.api().Read(context.get(), read);
    std::string got;
    for (v1::ReadResponse piece; reader->Read(&piece);) {
      EXPECT_EQ(piece.source(), v1::READ_SOURCE_LOCAL) << path;
      got += piece.data();
    }
    ASSERT_TRUE(reader->Finish().ok()) << path;
    EXPECT_EQ(got, data) << path;
  }
  EXPECT_EQ(origin_->bytesServed(), originBytes + datasetBytes()) << "the stranger's read only";
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root_ / "n1" / "cache")) {
    if (!entry.is_regular_file()) continue;
    EXPECT_EQ(entry.hard_link_count(), 1u) << entry.path();
  }
}

TEST_F(CacheNodeProcessTest, RefusesCallsWithoutTheToken) {
  NodeProcess& node = addNode("n1");
  v1::ListDatasetsRequest request;
  v1::ListDatasetsResponse response;
  EXPECT_EQ(node.api().ListDatasets(authorized("").get(), request, &response).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(node.api().ListDatasets(authorized("wrong").get(), request, &response).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(node.api().ListDatasets(authorized().get(), request, &response).ok());
  EXPECT_EQ(node.log().find(kToken), std::string::npos);
}

TEST_F(CacheNodeProcessTest, BadRequestsNameTheField) {
  NodeProcess& node = addNode("n1");
  auto request = ensureRequest();
  request.mutable_mounts(0)->mutable_source()->set_uri("ftp://example.org/data/");
  v1::EnsureDatasetResponse response;
  grpc::Status status = node.api().EnsureDataset(authorized().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("mounts[0].source.uri"), std::string::npos)
      << status.error_message();

  request = ensureRequest();
  request.mutable_dataset()->clear_name();
  status = node.api().EnsureDataset(authorized().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("dataset.name"), std::string::npos);

  request = ensureRequest();
  request.mutable_mounts(0)->mutable_credentials()->set_secret_access_key("SUPERSECRETKEY");
  request.mutable_mounts(0)->mutable_source()->set_uri("s3://Bad_Bucket/x/");
  status = node.api().EnsureDataset(authorized().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message().find("SUPERSECRETKEY"), std::string::npos);
  EXPECT_EQ(node.log().find("SUPERSECRETKEY"), std::string::npos);
}

TEST_F(CacheNodeProcessTest, FileSourcesAreReadOnlyWithinTheConfiguredRoots) {
  // A cluster's default: no fileOriginRoots, so no directory of the node is served.
  NodeProcess& bare = addNode("n1");
  auto request = ensureRequest();
  request.mutable_mounts(0)->mutable_source()->set_uri("file:///var/lib/kubelet/pods/");
  v1::EnsureDatasetResponse response;
  grpc::Status status = bare.api().EnsureDataset(authorized().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("mounts[0].source.uri: file:///var/lib/kubelet/pods/ is "
                                        "refused"),
            std::string::npos)
      << status.error_message();
  EXPECT_NE(status.error_message().find("cacheNode.fileOriginRoots"), std::string::npos)
      << status.error_message();
  // Names become directories of the node's mounts: none may climb out of them.
  for (const auto& [name, ns] : {std::pair{"../../etc", "ml"}, std::pair{"coco", ".."}}) {
    request = ensureRequest();
    request.mutable_dataset()->set_name(name);
    request.mutable_dataset()->set_namespace_(ns);
    status = bare.api().EnsureDataset(authorized().get(), request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << name << " " << ns;
    EXPECT_NE(
        status.error_message().find(std::string(ns) == ".." ? "dataset.namespace" : "dataset.name"),
        std::string::npos)
        << status.error_message();
  }

  // A node that allows the origin directory reads it, and nothing beside or above it.
  nodes_.push_back(std::make_unique<NodeProcess>(root_ / "n2", "n2"));
  NodeProcess& node = *nodes_.back();
  std::ofstream(root_ / "n2" / "config.yaml", std::ios::app)
      << "fileOriginRoots: [" << sharedRoot(root_ / "origin") << "]\n";
  node.start();
  std::filesystem::create_directory_symlink("/", root_ / "origin" / "host");
  const auto onNode = [&](const std::string& uri) {
    auto r = ensureRequest();
    r.clear_node_set();
    r.add_node_set()->set_node_name(node.name());
    r.mutable_node_set(0)->set_address(node.address());
    r.mutable_mounts(0)->mutable_source()->set_uri(uri);
    return r;
  };
  for (const std::string& uri :
       {"file://" + root_.string() + "/", "file://" + (root_ / "origin" / "..").string() + "/",
        "file://" + (root_ / "origin" / "host" / "etc").string() + "/",
        "file://" + (root_ / "origin2").string() + "/"}) {
    status = node.api().EnsureDataset(authorized().get(), onNode(uri), &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << uri;
    EXPECT_NE(status.error_message().find(uri + " is outside the cache node's fileOriginRoots (" +
                                          (root_ / "origin").string() + ")"),
              std::string::npos)
        << status.error_message();
  }
  status = node.api().EnsureDataset(
      authorized().get(), onNode("file://" + (root_ / "origin").string() + "/"), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(waitReady(node).phase(), v1::DATASET_PHASE_READY);
  for (const auto& [path, data] : files_) EXPECT_EQ(readFile(node, path), data) << path;
}

// A root of namespaces: a Dataset reads only its own namespace's directory beneath it. Another
// namespace's directory, reached by name, by ".." or through a symlink in its own, is refused
// with PERMISSION_DENIED naming the root and the namespace; its own is served.
TEST_F(CacheNodeProcessTest, AFileSourceInAnotherNamespacesDirectoryIsRefused) {
  const auto teams = root_ / "teams";
  std::filesystem::create_directories(teams / "team-a" / "coco");
  std::filesystem::create_directories(teams / "ml" / "coco");
  std::ofstream(teams / "team-a" / "coco" / "private.bin") << "team-a's";
  std::ofstream(teams / "ml" / "coco" / "own.bin") << "ml's own";
  std::filesystem::create_directory_symlink(teams / "team-a" / "coco", teams / "ml" / "escape");
  nodes_.push_back(std::make_unique<NodeProcess>(root_ / "n1", "n1"));
  NodeProcess& node = *nodes_.back();
  std::ofstream(root_ / "n1" / "config.yaml", std::ios::app)
      << "fileOriginRoots: [" << rootOfNamespaces(teams) << "]\n";
  node.start();
  const auto onNode = [&](const std::string& uri) {
    auto r = ensureRequest();  // of namespace ml
    r.clear_node_set();
    r.add_node_set()->set_node_name(node.name());
    r.mutable_node_set(0)->set_address(node.address());
    r.mutable_mounts(0)->mutable_source()->set_uri(uri);
    return r;
  };
  v1::EnsureDatasetResponse response;
  for (const std::string& uri : {"file://" + (teams / "team-a" / "coco").string() + "/",
                                 "file://" + (teams / "ml" / ".." / "team-a" / "coco").string(),
                                 "file://" + (teams / "ml" / "escape").string() + "/"}) {
    const grpc::Status status =
        node.api().EnsureDataset(authorized().get(), onNode(uri), &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << uri;
    for (const std::string& said : std::vector<std::string>{"mounts[0].source.uri: " + uri + " is refused for namespace ml",
          (teams / "{namespace}").string(), (teams / "ml").string() + "/",
          "cacheNode.fileOriginRoots"})
      EXPECT_NE(status.error_message().find(said), std::string::npos)
          << said << " in " << status.error_message();
  }
  const grpc::Status own = node.api().EnsureDataset(
      authorized().get(), onNode("file://" + (teams / "ml" / "coco").string() + "/"), &response);
  ASSERT_TRUE(own.ok()) << own.error_message();
  EXPECT_EQ(waitReady(node).phase(), v1::DATASET_PHASE_READY);
  EXPECT_EQ(readFile(node, "own.bin"), "ml's own");
}

// A file:// source whose directory is not there yet (an export mounted after the Dataset is
// made) is awaited, not failed: the node says what it waits for, and once the directory appears
// it lists and warms on its own, every byte right.
TEST_F(CacheNodeProcessTest, AFileSourceThatAppearsLaterWarmsOnItsOwn) {
  nodes_.push_back(std::make_unique<NodeProcess>(root_ / "n1", "n1"));
  NodeProcess& node = *nodes_.back();
  std::filesystem::create_directories(root_ / "exports");
  std::ofstream(root_ / "n1" / "config.yaml", std::ios::app)
      << "fileOriginRoots: [" << sharedRoot(root_ / "exports") << "]\n";
  node.start();
  auto request = ensureRequest();
  const auto source = root_ / "exports" / "coco";
  request.mutable_mounts(0)->mutable_source()->set_uri("file://" + source.string() + "/");
  v1::EnsureDatasetResponse response;
  const grpc::Status ensured = node.api().EnsureDataset(authorized().get(), request, &response);
  ASSERT_TRUE(ensured.ok()) << ensured.error_message();
  const v1::DatasetStatus waiting = watchUntil(
      node, [](const v1::DatasetStatus& s) { return s.message().starts_with("waiting"); });
  EXPECT_EQ(waiting.phase(), v1::DATASET_PHASE_PENDING) << waiting.message();
  EXPECT_NE(waiting.message().find("waiting for the origin: file:// source " + source.string() +
                                   " does not exist on this node"),
            std::string::npos)
      << waiting.message();

  std::filesystem::copy(root_ / "origin", source, std::filesystem::copy_options::recursive);
  EXPECT_EQ(waitReady(node).phase(), v1::DATASET_PHASE_READY) << node.log();
  for (const auto& [path, data] : files_) EXPECT_EQ(readFile(node, path), data) << path;
  EXPECT_EQ(node.log().find("level=error"), std::string::npos) << node.log();
}

TEST_F(CacheNodeProcessTest, ThreeNodesReadTheOriginOnceAndServeEveryByte) {
  addNode("n1");
  addNode("n2");
  addNode("n3");
  const auto request = ensureRequest();
  for (auto& node : nodes_) {
    v1::EnsureDatasetResponse response;
    const grpc::Status status = node->api().EnsureDataset(authorized().get(), request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  int64_t owned = 0;
  for (auto& node : nodes_) {
    const auto status = waitReady(*node);
    ASSERT_EQ(status.phase(), v1::DATASET_PHASE_READY) << status.message();
    EXPECT_EQ(status.progress().cached_bytes(), status.progress().owned_bytes());
    EXPECT_EQ(status.progress().total_bytes(), datasetBytes());
    owned += status.progress().owned_bytes();
  }
  EXPECT_EQ(owned, datasetBytes());
  EXPECT_EQ(origin_->bytesServed(), datasetBytes());  // the origin gave each byte once
  // And was listed once: one node listed it, the other two followed that node's listing.
  std::set<std::string> directories = {""};
  for (const auto& [path, _] : files_) {
    for (auto dir = std::filesystem::path(path).parent_path(); !dir.empty();
         dir = dir.parent_path())
      directories.insert(dir.string());
  }
  EXPECT_EQ(origin_->directoryListings(), static_cast<int64_t>(directories.size()));

  std::map<v1::ReadSource, int64_t> sources;
  for (const auto& [path, data] : files_) EXPECT_EQ(readFile(*nodes_[0], path, &sources), data);
  EXPECT_EQ(sources[v1::READ_SOURCE_ORIGIN], 0);
  EXPECT_GT(sources[v1::READ_SOURCE_PEER], 0);
  EXPECT_EQ(sources[v1::READ_SOURCE_LOCAL] + sources[v1::READ_SOURCE_PEER], datasetBytes());
  EXPECT_EQ(origin_->bytesServed(), datasetBytes());

  // The node's metrics say the same.
  std::string metrics;
  ASSERT_EQ(
      testing::httpGet("http://127.0.0.1:" + std::to_string(nodes_[0]->metricsPort()) + "/metrics",
                       metrics),
      200);
  EXPECT_NE(metrics.find("granary_cache_read_bytes_total{dataset=\"ml/coco\",source=\"peer\"} " +
                         std::to_string(sources[v1::READ_SOURCE_PEER])),
            std::string::npos)
      << metrics;
}

TEST_F(CacheNodeProcessTest, ASetRefreshesAtOneListerAndItsNewVersionFetchesOnlyTheChange) {
  addNode("n1");
  addNode("n2");
  addNode("n3");
  v1::EnsureDatasetRequest request = ensureRequest();
  for (auto& node : nodes_) {
    v1::EnsureDatasetResponse response;
    ASSERT_TRUE(node->api().EnsureDataset(authorized().get(), request, &response).ok());
  }
  for (auto& node : nodes_) ASSERT_EQ(waitReady(*node).phase(), v1::DATASET_PHASE_READY);
  const std::map<std::string, std::string> before = files_;
  write("train/part-0.bin", std::string(7000, 'x'));
  write("train/part-new.bin", "a file added after the first version");
  std::filesystem::remove(root_ / "origin" / "train" / "part-23.bin");
  files_.erase("train/part-23.bin");
  const int64_t listings = origin_->directoryListings();
  const int64_t served = origin_->bytesServed();

  // Asked of any node, the refresh runs at the node that lists version 2.
  v1::RefreshDatasetRequest refresh;
  *refresh.mutable_dataset() = request.dataset();
  refresh.set_next_generation(2);
  v1::RefreshDatasetResponse answer;
  ASSERT_TRUE(nodes_[0]->api().RefreshDataset(authorized().get(), refresh, &answer).ok());
  NodeProcess* lister = nodes_[0].get();
  if (answer.state() == v1::RefreshDatasetResponse::STATE_ELSEWHERE) {
    for (auto& node : nodes_)
      if (node->name() == answer.lister()) lister = node.get();
    ASSERT_NE(lister, nodes_[0].get()) << answer.lister();
  }
  answer = refreshUntilDone(*lister, refresh);
  ASSERT_EQ(answer.state(), v1::RefreshDatasetResponse::STATE_CHANGED) << answer.message();
  EXPECT_EQ(answer.added(), 1);
  EXPECT_EQ(answer.changed(), 1);
  EXPECT_EQ(answer.removed(), 1);
  EXPECT_EQ(answer.unchanged(), static_cast<int64_t>(before.size()) - 2);
  EXPECT_EQ(origin_->bytesServed(), served) << "a refresh lists; it fetches nothing";
  const int64_t listedOnce = origin_->directoryListings() - listings;
  EXPECT_GT(listedOnce, 0);

  // Version 2 on every node: listed nowhere again, and only the added and changed bytes fetched.
  request.mutable_dataset()->set_generation(2);
  for (auto& node : nodes_) {
    v1::EnsureDatasetResponse response;
    ASSERT_TRUE(node->api().EnsureDataset(authorized().get(), request, &response).ok());
  }
  for (auto& node : nodes_) ASSERT_EQ(waitReady(*node).phase(), v1::DATASET_PHASE_READY);
  EXPECT_EQ(origin_->directoryListings() - listings, listedOnce);
  EXPECT_EQ(origin_->bytesServed() - served,
            static_cast<int64_t>(files_["train/part-0.bin"].size() +
                                 files_["train/part-new.bin"].size()));
  // Each version serves its own bytes, the old one the file since removed too.
  for (const auto& [path, data] : files_) EXPECT_EQ(readFile(*nodes_[1], path, nullptr, 2), data);
  for (const auto& [path, data] : before) EXPECT_EQ(readFile(*nodes_[1], path, nullptr, 1), data);
}

TEST_F(CacheNodeProcessTest, ABucketRefreshedAtTheNodeMakesAVersionOfItAsItIsNow) {
  std::string skip;
  auto bucket = S3rver::start(GRANARY_SOURCE_DIR, skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  ASSERT_TRUE(bucket.isOk()) << bucket.status();
  std::map<std::string, std::string> held;
  const auto put = [&](const std::string& key, const std::string& bytes) {
    ASSERT_EQ((*bucket)->put("train/" + key, bytes), 200) << key;
    held[key] = bytes;
  };
  std::mt19937 random(3);
  const auto bytes = [&](size_t size) {
    std::string data(size, '\0');
    for (auto& c : data) c = static_cast<char>(random());
    return data;
  };
  for (int i = 0; i < 20; ++i) put("part-" + std::to_string(i) + ".bin", bytes(3000 + 100 * i));
  NodeProcess& node = addNode("n1");
  v1::EnsureDatasetRequest request = ensureBucketRequest(**bucket, "s3://data/train/");
  v1::EnsureDatasetResponse ensured;
  ASSERT_TRUE(node.api().EnsureDataset(authorized().get(), request, &ensured).ok());
  ASSERT_EQ(waitReady(node).phase(), v1::DATASET_PHASE_READY);
  const auto before = held;
  put("part-3.bin", bytes(3300));  // the same size, another ETag
  put("part-new.bin", "added");
  ASSERT_EQ((*bucket)->remove("train/part-7.bin"), 204);
  held.erase("part-7.bin");

  v1::RefreshDatasetRequest refresh;
  *refresh.mutable_dataset() = request.dataset();
  refresh.set_next_generation(2);
  const v1::RefreshDatasetResponse answer = refreshUntilDone(node, refresh);
  ASSERT_EQ(answer.state(), v1::RefreshDatasetResponse::STATE_CHANGED) << answer.message();
  EXPECT_EQ(answer.added(), 1);
  EXPECT_EQ(answer.changed(), 1);
  EXPECT_EQ(answer.removed(), 1);
  request.mutable_dataset()->set_generation(2);
  ASSERT_TRUE(node.api().EnsureDataset(authorized().get(), request, &ensured).ok());
  ASSERT_EQ(waitReady(node).phase(), v1::DATASET_PHASE_READY);
  for (const auto& [path, data] : held) EXPECT_EQ(readFile(node, path, nullptr, 2), data);
  for (const auto& [path, data] : before) EXPECT_EQ(readFile(node, path, nullptr, 1), data);
}

TEST_F(CacheNodeProcessTest, KilledMidRefreshItServesTheLastVersionAndRefreshesAgainWhole) {
  NodeProcess& node = addNode("n1");
  ASSERT_TRUE(ensureReady(node));
  const std::map<std::string, std::string> before = files_;
  for (int i = 0; i < 2000; ++i) write("more/f-" + std::to_string(i), std::to_string(i));
  write("train/part-0.bin", std::string(7000, 'x'));
  v1::RefreshDatasetRequest refresh;
  *refresh.mutable_dataset() = ensureRequest().dataset();
  refresh.set_next_generation(2);
  v1::RefreshDatasetResponse answer;
  ASSERT_TRUE(node.api().RefreshDataset(authorized().get(), refresh, &answer).ok());
  ASSERT_EQ(answer.state(), v1::RefreshDatasetResponse::STATE_RUNNING);
  EXPECT_TRUE(answer.started());
  node.kill(SIGKILL);  // mid-listing: the refresh is gone with the process
  node.start();

  // The node comes back on version 1, whole; version 2 does not exist until a refresh makes it.
  ASSERT_TRUE(ensureReady(node));
  for (const auto& [path, data] : before) EXPECT_EQ(readFile(node, path), data);
  v1::GetDatasetStatusRequest second;
  *second.mutable_dataset() = refresh.dataset();
  second.mutable_dataset()->set_generation(2);
  v1::DatasetStatus status;
  EXPECT_EQ(node.api().GetDatasetStatus(authorized().get(), second, &status).error_code(),
            grpc::StatusCode::NOT_FOUND);
  // Asked again, the refresh starts over and lists the origin whole: nothing of the cut one is
  // counted twice or missed.
  answer = refreshUntilDone(node, refresh);
  ASSERT_EQ(answer.state(), v1::RefreshDatasetResponse::STATE_CHANGED) << answer.message();
  EXPECT_EQ(answer.added(), 2000);
  EXPECT_EQ(answer.changed(), 1);
  EXPECT_EQ(answer.removed(), 0);
  EXPECT_EQ(answer.unchanged(), static_cast<int64_t>(before.size()) - 1);
  v1::EnsureDatasetRequest next = ensureRequest();
  next.mutable_dataset()->set_generation(2);
  v1::EnsureDatasetResponse ensured;
  ASSERT_TRUE(node.api().EnsureDataset(authorized().get(), next, &ensured).ok());
  ASSERT_EQ(waitReady(node).phase(), v1::DATASET_PHASE_READY);
  for (const auto& [path, data] : files_) EXPECT_EQ(readFile(node, path, nullptr, 2), data);
}

TEST_F(CacheNodeProcessTest, KilledWhileWarmingResumesWithoutFetchingVerifiedChunksAgain) {
  NodeProcess& node = addNode("n1");
  const int64_t rate = 2 << 20;  // the 5 MiB blob and the small files take ~3 s
  const auto request = ensureRequest(rate);
  v1::EnsureDatasetResponse response;
  ASSERT_TRUE(node.api().EnsureDataset(authorized().get(), request, &response).ok());
  watchUntil(node, [&](const v1::DatasetStatus& s) {
    return s.progress().cached_bytes() >= datasetBytes() / 3;
  });
  const int64_t cachedAtKill = statusOf(node).progress().cached_bytes();
  node.kill(SIGKILL);
  ASSERT_GT(cachedAtKill, 0);
  ASSERT_LT(cachedAtKill, datasetBytes());
  const int64_t servedBeforeRestart = origin_->bytesServed();

  node.start();
  ASSERT_TRUE(node.api().EnsureDataset(authorized().get(), request, &response).ok());
  const auto status = waitReady(node);
  ASSERT_EQ(status.phase(), v1::DATASET_PHASE_READY) << status.message();
  EXPECT_EQ(status.progress().cached_bytes(), datasetBytes());
  // The second run fetched only what was not verified on disk: at most the rest of the data.
  EXPECT_LE(origin_->bytesServed() - servedBeforeRestart, datasetBytes() - cachedAtKill);
  std::map<v1::ReadSource, int64_t> sources;
  for (const auto& [path, data] : files_) EXPECT_EQ(readFile(node, path, &sources), data);
  EXPECT_EQ(sources[v1::READ_SOURCE_LOCAL], datasetBytes());
}

// The node's GPUs through NVML (the fake library, by the nvmlLibrary option): in GetTelemetry,
// field by field with their processes, and in /metrics; a node without NVML says why.
TEST_F(CacheNodeProcessTest, TelemetryCarriesTheGpusOrWhyThereAreNone) {
  const testing::FakeNvmlScenario scenario;  // the nodes inherit its variable
  scenario.play(
      "gpu GPU-7c NVIDIA_H100 util=64 used=2048 total=8192 unsupported=power\n"
      "proc 0 31337 1024 58\n");
  for (const auto& [name, library] : {std::pair{"n1", std::string(GRANARY_FAKE_NVML_LIBRARY)},
                                      {"n2", "/nonexistent/libnvml.so"}}) {
    nodes_.push_back(std::make_unique<NodeProcess>(root_ / name, name));
    std::ofstream(root_ / name / "config.yaml", std::ios::app)
        << "nvmlLibrary: " << library << "\ngpuSampleIntervalMs: 100\n";
    nodes_.back()->start();
  }
  v1::GetTelemetryResponse telemetry;
  ASSERT_TRUE(nodes_[0]->api().GetTelemetry(authorized().get(), {}, &telemetry).ok());
  EXPECT_EQ(telemetry.gpu_unavailable_reason(), "");
  ASSERT_EQ(telemetry.gpus_size(), 1) << nodes_[0]->log();
  const v1::GpuTelemetry& gpu = telemetry.gpus(0);
  EXPECT_EQ(gpu.uuid(), "GPU-7c");
  EXPECT_EQ(gpu.model_name(), "NVIDIA H100");
  EXPECT_DOUBLE_EQ(gpu.utilization_ratio(), 0.64);
  EXPECT_EQ(gpu.memory_total_bytes(), 8192);
  EXPECT_FALSE(gpu.has_power_watts()) << "a field NVML cannot read is absent";
  ASSERT_EQ(gpu.processes_size(), 1);
  EXPECT_EQ(gpu.processes(0).pid(), 31337);
  EXPECT_DOUBLE_EQ(gpu.processes(0).sm_utilization_ratio(), 0.58);
  EXPECT_GT(telemetry.gpu_sample_time().seconds(), 0);
  std::string metrics;
  ASSERT_EQ(
      testing::httpGet("http://127.0.0.1:" + std::to_string(nodes_[0]->metricsPort()) + "/metrics",
                       metrics),
      200);
  EXPECT_NE(metrics.find("granary_gpu_sampler_up 1"), std::string::npos) << metrics;
  EXPECT_NE(
      metrics.find(
          R"(granary_gpu_utilization_ratio{Hostname="n1",UUID="GPU-7c",container="",gpu="0")"),
      std::string::npos)
      << metrics;

  ASSERT_TRUE(nodes_[1]->api().GetTelemetry(authorized().get(), {}, &telemetry).ok());
  EXPECT_EQ(telemetry.gpus_size(), 0);
  EXPECT_NE(telemetry.gpu_unavailable_reason().find("no NVIDIA driver"), std::string::npos)
      << telemetry.gpu_unavailable_reason();
  EXPECT_NE(nodes_[1]->log().find("no GPU telemetry on this node"), std::string::npos);
}

TEST_F(CacheNodeProcessTest, WatchProgressStreamsUntilReady) {
  NodeProcess& node = addNode("n1");
  const auto request = ensureRequest(2 << 20);  // ~2.4 s of warming after the burst
  v1::EnsureDatasetResponse response;
  ASSERT_TRUE(node.api().EnsureDataset(authorized().get(), request, &response).ok());
  v1::WatchProgressRequest watch;
  *watch.mutable_dataset() = request.dataset();
  watch.mutable_interval()->set_nanos(100'000'000);
  auto context = authorized();
  auto stream = node.api().WatchProgress(context.get(), watch);
  std::vector<int64_t> cached;
  v1::DatasetStatus status;
  while (stream->Read(&status)) {
    cached.push_back(status.progress().cached_bytes());
    if (status.phase() == v1::DATASET_PHASE_READY) break;
  }
  context->TryCancel();
  (void)stream->Finish();
  EXPECT_EQ(status.phase(), v1::DATASET_PHASE_READY);
  ASSERT_GE(cached.size(), 3u);
  EXPECT_TRUE(std::is_sorted(cached.begin(), cached.end()));
  EXPECT_EQ(cached.back(), datasetBytes());
  EXPECT_GT(status.progress().bytes_per_second(), 0);
}

TEST_F(CacheNodeProcessTest, ServesAndTransfersBetweenPeersOverTls) {
  auto certificates = testing::TestCertificates::create();
  if (!certificates.isOk()) GTEST_SKIP() << certificates.status();
  addNode("n1", &*certificates);
  addNode("n2", &*certificates);
  const auto request = ensureRequest();
  for (auto& node : nodes_) {
    v1::EnsureDatasetResponse response;
    const grpc::Status status = node->api().EnsureDataset(authorized().get(), request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  for (auto& node : nodes_) ASSERT_EQ(waitReady(*node).phase(), v1::DATASET_PHASE_READY);
  std::map<v1::ReadSource, int64_t> sources;
  for (const auto& [path, data] : files_) EXPECT_EQ(readFile(*nodes_[0], path, &sources), data);
  EXPECT_GT(sources[v1::READ_SOURCE_PEER], 0);  // n2's share came over TLS
  EXPECT_EQ(sources[v1::READ_SOURCE_ORIGIN], 0);

  // A client that does not speak TLS gets nowhere.
  auto plain = v1::CacheNode::NewStub(
      grpc::CreateChannel(nodes_[0]->address(), grpc::InsecureChannelCredentials()));
  v1::ListDatasetsResponse listed;
  auto context = authorized();
  context->set_deadline(std::chrono::system_clock::now() + 2s);
  EXPECT_FALSE(plain->ListDatasets(context.get(), v1::ListDatasetsRequest(), &listed).ok());
}

TEST_F(CacheNodeProcessTest, PurgeFreesTheCache) {
  NodeProcess& node = addNode("n1");
  const auto request = ensureRequest();
  v1::EnsureDatasetResponse response;
  ASSERT_TRUE(node.api().EnsureDataset(authorized().get(), request, &response).ok());
  ASSERT_EQ(waitReady(node).phase(), v1::DATASET_PHASE_READY);
  v1::PurgeDatasetRequest purge;
  *purge.mutable_dataset() = request.dataset();
  v1::PurgeDatasetResponse purged;
  ASSERT_TRUE(node.api().PurgeDataset(authorized().get(), purge, &purged).ok());
  EXPECT_EQ(purged.freed_bytes(), datasetBytes());
  v1::GetDatasetStatusRequest get;
  *get.mutable_dataset() = request.dataset();
  v1::DatasetStatus status;
  EXPECT_EQ(node.api().GetDatasetStatus(authorized().get(), get, &status).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

// The CSI node plugin as kubelet drives it, through a real gRPC client on the unix socket: a
// pod's inline volume shows its namespace's dataset read-only, byte for byte; bad or foreign
// requests get errors that name the field.
TEST_F(CacheNodeProcessTest, CsiPublishesDatasetsToPodsOfTheirNamespace) {
  if (!canMount()) GTEST_SKIP() << "FUSE mounts need root and /dev/fuse";
  NodeProcess& node = addNode("n1");
  ASSERT_TRUE(ensureReady(node));

  auto channel = grpc::CreateChannel(node.csiAddress(), grpc::InsecureChannelCredentials());
  ASSERT_TRUE(channel->WaitForConnected(std::chrono::system_clock::now() + 10s));
  auto identity = csi::v1::Identity::NewStub(channel);
  auto csiNode = csi::v1::Node::NewStub(channel);
  {
    grpc::ClientContext context;
    csi::v1::GetPluginInfoResponse info;
    ASSERT_TRUE(identity->GetPluginInfo(&context, {}, &info).ok());
    EXPECT_EQ(info.name(), "csi.granary.io");
    grpc::ClientContext nodeContext;
    csi::v1::NodeGetInfoResponse nodeInfo;
    ASSERT_TRUE(csiNode->NodeGetInfo(&nodeContext, {}, &nodeInfo).ok());
    EXPECT_EQ(nodeInfo.node_id(), "n1");
  }

  const auto target = root_ / "pods" / "uid-a" / "volumes" / "data";
  const auto publishRequest = [&](const std::string& podNamespace,
                                  std::map<std::string, std::string> attributes) {
    return csiPublishRequest(target, podNamespace, std::move(attributes));
  };
  const auto publish = [&](const csi::v1::NodePublishVolumeRequest& request) {
    grpc::ClientContext context;
    csi::v1::NodePublishVolumeResponse response;
    return csiNode->NodePublishVolume(&context, request, &response);
  };

  // Refusals, each naming what to fix.
  const auto expectRefused = [&](const csi::v1::NodePublishVolumeRequest& request,
                                 grpc::StatusCode code, const std::string& words) {
    const grpc::Status status = publish(request);
    EXPECT_EQ(status.error_code(), code) << status.error_message();
    EXPECT_NE(status.error_message().find(words), std::string::npos) << status.error_message();
    EXPECT_FALSE(std::filesystem::exists(target / "big"));
  };
  expectRefused(publishRequest("ml", {}), grpc::StatusCode::INVALID_ARGUMENT,
                "volumeAttributes.dataset");
  expectRefused(publishRequest("ml", {{"dataset", "coco"}, {"cache", "yes"}}),
                grpc::StatusCode::INVALID_ARGUMENT, "volumeAttributes.cache");
  expectRefused(publishRequest("other", {{"dataset", "coco"}, {"namespace", "ml"}}),
                grpc::StatusCode::PERMISSION_DENIED, "own namespace");
  expectRefused(publishRequest("other", {{"dataset", "coco"}}), grpc::StatusCode::NOT_FOUND,
                "other/coco");
  auto block = publishRequest("ml", {{"dataset", "coco"}});
  block.mutable_volume_capability()->mutable_block();
  expectRefused(block, grpc::StatusCode::INVALID_ARGUMENT, "block");
  auto persistent = publishRequest("ml", {{"dataset", "coco"}});
  persistent.mutable_volume_context()->erase("csi.storage.k8s.io/ephemeral");
  expectRefused(persistent, grpc::StatusCode::INVALID_ARGUMENT, "podInfoOnMount");

  // Published (twice: kubelet retries), read-only, every byte the origin's.
  const auto request = publishRequest("ml", {{"dataset", "coco"}});
  ASSERT_TRUE(publish(request).ok()) << node.log();
  ASSERT_TRUE(publish(request).ok());
  for (const auto& [path, data] : files_) {
    std::ifstream in(target / path, std::ios::binary);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), data) << path;
  }
  EXPECT_LT(::open((target / "new").c_str(), O_CREAT | O_WRONLY, 0644), 0);
  EXPECT_EQ(errno, EROFS);

  // Reads are accounted to this process (the test is in no pod), in telemetry and metrics.
  v1::GetTelemetryResponse telemetry;
  ASSERT_TRUE(node.api().GetTelemetry(authorized().get(), {}, &telemetry).ok());
  int64_t bytes = 0;
  for (const auto& reader : telemetry.readers()) {
    EXPECT_EQ(reader.dataset().name(), "coco");
    EXPECT_EQ(reader.pid(), ::getpid());
    bytes +=
        reader.reads().local_bytes() + reader.reads().peer_bytes() + reader.reads().origin_bytes();
  }
  // Every byte at least once; the kernel may drop a page under memory pressure and read it again.
  EXPECT_GE(bytes, datasetBytes());
  EXPECT_LE(bytes, 2 * datasetBytes());
  std::string metrics;
  ASSERT_EQ(testing::httpGet("http://127.0.0.1:" + std::to_string(node.metricsPort()) + "/metrics",
                             metrics),
            200);
  EXPECT_NE(metrics.find(
                "granary_dataset_read_bytes_total{dataset=\"ml/coco\",namespace=\"\",pod=\"process:" +
                processName() + "\",source=\"local\"}"),
            std::string::npos)
      << metrics;

  // Killed, the node leaves a dead mount; the next start removes it, and unpublishing the pod's
  // dead view still works.
  node.kill(SIGKILL);
  const auto datasetMount = root_ / "n1" / "mounts" / "ml" / "coco" / "1";
  struct statvfs vfs;  // statfs always asks the daemon; stat may be answered from the cache
  EXPECT_NE(::statvfs(datasetMount.c_str(), &vfs), 0);
  EXPECT_EQ(errno, ENOTCONN);
  node.start();
  EXPECT_EQ(::statvfs(datasetMount.c_str(), &vfs), 0) << "the stale mount is gone";

  // Unpublished (twice is fine): the pod's directory goes.
  for (int i = 0; i < 2; ++i) {
    grpc::ClientContext context;
    csi::v1::NodeUnpublishVolumeRequest unpublish;
    unpublish.set_volume_id("csi-uid-a");
    unpublish.set_target_path(target.string());
    csi::v1::NodeUnpublishVolumeResponse response;
    ASSERT_TRUE(csiNode->NodeUnpublishVolume(&context, unpublish, &response).ok());
  }
  EXPECT_FALSE(std::filesystem::exists(target));

  // A graceful stop unmounts the dataset.
  node.kill(SIGTERM);
  std::ifstream mounts("/proc/self/mounts");
  const std::string text(std::istreambuf_iterator<char>(mounts), {});
  EXPECT_EQ(text.find((root_ / "n1" / "mounts").string()), std::string::npos) << text;
}

// A worker of a job with warmPolicy BeforeStart (a replacement, or one growing an elastic job)
// placed on a node whose share of the dataset is still warming starts only once it is warm: its
// volume (warmFirst) is not published meanwhile, and the kubelet is told how far the warming is.
// A volume that does not ask is published at once, reading through.
TEST_F(CacheNodeProcessTest, AWarmFirstVolumeIsPublishedOnceThisNodesShareIsWarm) {
  if (!canMount()) GTEST_SKIP() << "FUSE mounts need root and /dev/fuse";
  NodeProcess& node = addNode("n1");
  v1::EnsureDatasetResponse ensured;
  ASSERT_TRUE(
      node.api().EnsureDataset(authorized().get(), ensureRequest(512 << 10), &ensured).ok());
  auto channel = grpc::CreateChannel(node.csiAddress(), grpc::InsecureChannelCredentials());
  ASSERT_TRUE(channel->WaitForConnected(std::chrono::system_clock::now() + 10s));
  auto csiNode = csi::v1::Node::NewStub(channel);
  const auto publish = [&](const csi::v1::NodePublishVolumeRequest& request,
                           std::chrono::seconds deadline) {
    grpc::ClientContext context;  // the node waits until 2 s before the kubelet's deadline
    context.set_deadline(std::chrono::system_clock::now() + deadline);
    csi::v1::NodePublishVolumeResponse response;
    return csiNode->NodePublishVolume(&context, request, &response);
  };
  const auto warmFirst = root_ / "pods" / "uid-w" / "volumes" / "data";
  const auto readThrough = root_ / "pods" / "uid-r" / "volumes" / "data";
  const auto warmFirstRequest =
      csiPublishRequest(warmFirst, "ml", {{"dataset", "coco"}, {"warmFirst", "true"}});

  const grpc::Status early = publish(warmFirstRequest, 4s);  // 5.5 MB at 512 KiB/s: ~10 s
  EXPECT_EQ(early.error_code(), grpc::StatusCode::UNAVAILABLE) << early.error_message();
  EXPECT_NE(early.error_message().find("not warm yet"), std::string::npos) << early.error_message();
  EXPECT_NE(early.error_message().find("ml/coco Warming"), std::string::npos)
      << early.error_message();
  EXPECT_FALSE(std::filesystem::exists(warmFirst / "big"));
  ASSERT_TRUE(publish(csiPublishRequest(readThrough, "ml", {{"dataset", "coco"}}), 10s).ok())
      << "a volume that does not ask is published at once";
  EXPECT_NE(statusOf(node).phase(), v1::DATASET_PHASE_READY);

  const grpc::Status warm = publish(warmFirstRequest, 60s);
  ASSERT_TRUE(warm.ok()) << warm.error_message() << "\n" << node.log();
  EXPECT_EQ(statusOf(node).phase(), v1::DATASET_PHASE_READY)
      << "published only once this node's share is warm";
  for (const auto& [path, data] : files_) {
    std::ifstream in(warmFirst / path, std::ios::binary);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), data) << path;
  }
  for (const auto& target : {warmFirst, readThrough})
    EXPECT_TRUE(unpublishVolume(node, target).ok());
}

// Restarts with running readers: a pod reads the dataset through its volume while the node is
// killed and started again (as the operator does, the dataset is then ensured again), and again
// stopped gracefully and started. With the mount keeper, reads only wait: none fails or returns
// a wrong byte, and the pod's mount is the very same one throughout.
TEST_F(CacheNodeProcessTest, ReadersOnlyWaitWhileTheNodeRestartsWithAMountKeeper) {
  if (!canMount()) GTEST_SKIP() << "FUSE mounts need root and /dev/fuse";
  std::optional<Readers> readers;  // stopped last: when a check fails, the keeper goes first and
                                   // the mount with it, so that no read waits forever
  KeeperProcess keeper(root_ / "keeper.sock");
  NodeProcess& node = addNode("n1", nullptr, keeper.socket().string());
  ASSERT_TRUE(ensureReady(node));
  const auto target = root_ / "pods" / "uid-a" / "volumes" / "data";
  ASSERT_TRUE(publishVolume(node, target).ok()) << node.log();
  const int mountId = mountIdOf(target);
  ASSERT_GT(mountId, 0);

  readers.emplace(target, files_, 4);
  ASSERT_TRUE(readers->waitFor(200));
  std::chrono::steady_clock::duration longestRestart{};
  for (const int signal : {SIGKILL, SIGTERM}) {
    const auto stopped = std::chrono::steady_clock::now();
    node.kill(signal);
    std::this_thread::sleep_for(500ms);  // readers wait on a node that is not there
    node.start();
    v1::EnsureDatasetResponse ensured;  // as the operator does when a node comes back
    ASSERT_TRUE(node.api().EnsureDataset(authorized().get(), ensureRequest(), &ensured).ok());
    ASSERT_TRUE(readers->waitFor(200)) << node.log();
    const auto back = std::chrono::steady_clock::now() - stopped;
    longestRestart = std::max(longestRestart, back);
    std::printf("signal %d: reads went on %.2f s after the node stopped\n", signal,
                std::chrono::duration<double>(back).count());
  }
  readers->stop();
  EXPECT_EQ(readers->failed(), 0) << ::testing::PrintToString(readers->failures()) << node.log();
  EXPECT_EQ(mountIdOf(target), mountId) << "the pod kept the same mount";
  std::printf("%lld files read whole, the longest took %.2f s\n",
              static_cast<long long>(readers->completed()),
              std::chrono::duration<double>(readers->longest()).count());
  EXPECT_LE(readers->longest(), longestRestart) << "no read waited longer than a restart";
  EXPECT_NE(node.log().find("dataset mount adopted"), std::string::npos) << node.log();
}

// The line of the node's log that holds `text`, waited for ("" after 10 s).
std::string logLine(const NodeProcess& node, const std::string& text) {
  std::string found;
  eventually(
      [&] {
        std::istringstream log(node.log());
        for (std::string line; std::getline(log, line);)
          if (line.find(text) != std::string::npos) return (found = line, true);
        return false;
      },
      10s);
  return found;
}

// A set of three nodes lists a bucket in shares (one top-level directory each, a lister each):
// each node lists its share and follows the other two over the peer API, and every node holds
// the bucket whole.
TEST_F(CacheNodeProcessTest, ASetListsABucketInSharesAndEveryNodeHoldsItWhole) {
  std::string skip;
  auto bucket = S3rver::start(GRANARY_SOURCE_DIR, skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  ASSERT_TRUE(bucket.isOk()) << bucket.status();
  std::map<std::string, std::string> held;
  for (const char* directory : {"a", "b", "c"}) {
    for (int i = 0; i < 5; ++i) {
      const std::string key = std::string(directory) + "/part-" + std::to_string(i) + ".bin";
      const std::string bytes(1000 + 10 * i, static_cast<char>('a' + i));
      ASSERT_EQ((*bucket)->put(key, bytes), 200) << key;
      held[key] = bytes;
    }
  }
  for (const char* name : {"n1", "n2", "n3"}) {
    nodes_.push_back(std::make_unique<NodeProcess>(root_ / name, name));
    std::ofstream(root_ / name / "config.yaml", std::ios::app) << "listingConcurrency: 1\n";
    nodes_.back()->start();
  }
  const v1::EnsureDatasetRequest request = ensureBucketRequest(**bucket, "s3://data/");
  for (auto& node : nodes_) {
    v1::EnsureDatasetResponse ensured;
    ASSERT_TRUE(node->api().EnsureDataset(authorized().get(), request, &ensured).ok());
  }
  for (auto& node : nodes_) {
    const auto status = waitReady(*node);
    ASSERT_EQ(status.phase(), v1::DATASET_PHASE_READY) << status.message();
    EXPECT_EQ(status.progress().total_files(), static_cast<int64_t>(held.size()));
    const std::string listed = logLine(*node, "listing in shares with the set");
    EXPECT_NE(listed.find("shares=3"), std::string::npos) << node->log();
    EXPECT_NE(listed.find("own_parts=1"), std::string::npos) << listed;
  }
  for (auto& node : nodes_)
    for (const auto& [path, data] : held) EXPECT_EQ(readFile(*node, path), data) << path;
}

// A pod's /readyz: 200 when ready.
long readyz(const NodeProcess& node) {
  std::string body;
  return testing::httpGet("http://127.0.0.1:" + std::to_string(node.metricsPort()) + "/readyz",
                          body);
}

// The DaemonSet replaces the node's pod (maxSurge): a new pod, with a new keeper and a new cache
// node (new processes, the same state directory and node-scoped sockets), starts beside the old
// one, which then ends; three times in a row, while a pod reads every file of the dataset through
// its view. The new pod takes the mounts over: no read fails or returns a wrong byte, the pod's
// mount is the very same one, and the new node is ready only once it serves them.
TEST_F(CacheNodeProcessTest, ReadersOnlyPauseWhileANewPodTakesTheNodeOver) {
  if (!canMount()) GTEST_SKIP() << "FUSE mounts need root and /dev/fuse";
  std::optional<Readers> readers;  // stopped last (see above)
  const auto socket = root_ / "n1" / "state" / "keeper" / "keeper.sock";
  std::vector<std::unique_ptr<KeeperProcess>> keepers;
  keepers.push_back(std::make_unique<KeeperProcess>(socket));
  NodeProcess& first = addNode("n1", nullptr, socket.string());
  if (logLine(first, "mount recovery").find("mount recovery on") == std::string::npos)
    GTEST_SKIP() << "this kernel cannot keep mounts: " << logLine(first, "mount recovery");
  ASSERT_TRUE(ensureReady(first));
  const auto target = root_ / "pods" / "uid-a" / "volumes" / "data";
  ASSERT_TRUE(publishVolume(first, target).ok()) << first.log();
  const int mountId = mountIdOf(target);
  ASSERT_GT(mountId, 0);

  readers.emplace(target, files_, 4);
  ASSERT_TRUE(readers->waitFor(200));
  NodeProcess* old = &first;
  std::vector<std::unique_ptr<NodeProcess>> pods;
  std::vector<double> handOvers;
  for (int round = 1; round <= 3; ++round) {
    keepers.push_back(std::make_unique<KeeperProcess>(socket));  // the new pod's containers
    pods.push_back(std::make_unique<NodeProcess>(root_ / ("n1-pod-" + std::to_string(round)), "n1",
                                                 nullptr, socket.string(), root_ / "n1"));
    NodeProcess& successor = *pods.back();
    const auto asked = std::chrono::steady_clock::now();
    successor.start();  // serves its API once it took the node over
    ASSERT_TRUE(eventually([&] { return readyz(successor) == 200; }, 30s)) << successor.log();
    handOvers.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count());
    EXPECT_NE(readyz(*old), 200) << "the old pod is not ready once it handed the node over";
    EXPECT_NE(logLine(successor, "released the node").find("datasets=1"), std::string::npos)
        << successor.log();
    ASSERT_TRUE(readers->waitFor(200)) << successor.log();
    // The old pod ends: its node and its keeper, gracefully.
    old->kill(SIGTERM);
    keepers[keepers.size() - 2]->stop();
    ASSERT_TRUE(readers->waitFor(200)) << successor.log();
    EXPECT_EQ(statusOf(successor).phase(), v1::DATASET_PHASE_READY);
    old = &successor;
    std::printf("hand-over %d: the new pod was ready %.2f s after it started\n", round,
                handOvers.back());
  }
  readers->stop();
  EXPECT_EQ(readers->failed(), 0) << ::testing::PrintToString(readers->failures()) << old->log();
  EXPECT_EQ(mountIdOf(target), mountId) << "the pod kept the same mount";
  std::printf("%lld files read whole, every byte compared; the longest read took %.2f s\n",
              static_cast<long long>(readers->completed()),
              std::chrono::duration<double>(readers->longest()).count());
  EXPECT_NE(old->log().find("dataset mount adopted"), std::string::npos) << old->log();
}

// The old pod killed hard (kill -9 of every container) while the new one waits for it to hand the
// node over (it is stopped first, so that the kill lands mid-way): the new pod goes on without
// it, says so, and once the dataset is ensured again (as the operator does) serves every byte;
// the pod reading through the new keeper's connection never sees a wrong one.
TEST_F(CacheNodeProcessTest, AnOldPodKilledMidHandOverLeavesTheNodeRecoverable) {
  if (!canMount()) GTEST_SKIP() << "FUSE mounts need root and /dev/fuse";
  std::optional<Readers> readers;
  const auto socket = root_ / "n1" / "state" / "keeper" / "keeper.sock";
  std::vector<std::unique_ptr<KeeperProcess>> keepers;
  keepers.push_back(std::make_unique<KeeperProcess>(socket));
  NodeProcess& old = addNode("n1", nullptr, socket.string());
  if (logLine(old, "mount recovery").find("mount recovery on") == std::string::npos)
    GTEST_SKIP() << "this kernel cannot keep mounts: " << logLine(old, "mount recovery");
  ASSERT_TRUE(ensureReady(old));
  const auto target = root_ / "pods" / "uid-a" / "volumes" / "data";
  ASSERT_TRUE(publishVolume(old, target).ok()) << old.log();
  readers.emplace(target, files_, 4);
  ASSERT_TRUE(readers->waitFor(200));

  keepers.push_back(std::make_unique<KeeperProcess>(socket));
  NodeProcess successor(root_ / "n1-pod-1", "n1", nullptr, socket.string(), root_ / "n1");
  ASSERT_EQ(::kill(old.pid(), SIGSTOP), 0);
  std::jthread killer([&] {  // once the new node asked
    eventually([&] { return successor.log().find("asking the cache node") != std::string::npos; });
    old.kill(SIGKILL);
    keepers.front()->kill();
  });
  successor.start();
  killer.join();
  v1::EnsureDatasetResponse ensured;  // as the operator does when a node comes back
  ASSERT_TRUE(successor.api().EnsureDataset(authorized().get(), ensureRequest(), &ensured).ok());
  ASSERT_TRUE(readers->waitFor(400)) << successor.log();
  readers->stop();
  for (const auto& [path, data] : files_) {
    std::ifstream in(target / path, std::ios::binary);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), data) << path;
  }
  EXPECT_EQ(readers->failed(), 0) << ::testing::PrintToString(readers->failures())
                                  << successor.log();
  EXPECT_NE(successor.log().find("did not hand the node over"), std::string::npos)
      << successor.log();
  EXPECT_NE(successor.log().find("dataset mount adopted"), std::string::npos) << successor.log();
}

// Skew: the pod being replaced runs a version without the hand-over (simulated: its hand-over
// socket is gone), holding the state. The new node neither crashes nor hangs: it says why it
// waits, reports ready meanwhile (so that a surge rollout goes on and ends the old pod), and
// opens the state once the old node is gone.
TEST_F(CacheNodeProcessTest, ANodeThatCannotHandOverIsWaitedForWhileReady) {
  NodeProcess& old = addNode("n1");
  ASSERT_TRUE(ensureReady(old));
  std::filesystem::remove(root_ / "n1" / "state" / "handover.sock");
  NodeProcess successor(root_ / "n1-pod-1", "n1", nullptr, "", root_ / "n1");
  std::atomic<bool> readyWhileWaiting = false;
  std::jthread rollout([&] {  // the DaemonSet controller: the new pod ready, the old one deleted
    readyWhileWaiting = eventually([&] {
      return readyz(successor) == 200 &&
             successor.log().find("cannot hand over holds the state") != std::string::npos;
    });
    old.kill(SIGTERM);
  });
  successor.start();
  rollout.join();
  EXPECT_TRUE(readyWhileWaiting) << successor.log();
  EXPECT_NE(successor.log().find("the older cache node ended"), std::string::npos)
      << successor.log();
  ASSERT_TRUE(ensureReady(successor)) << successor.log();
  EXPECT_EQ(readFile(successor, "train/part-3.bin"), files_.at("train/part-3.bin"));
}

// The mounts of this process's view under `directory`, one a line.
std::string mountsUnder(const std::filesystem::path& directory) {
  std::ifstream mounts("/proc/self/mounts");
  std::string found;
  for (std::string device, point, rest; mounts >> device >> point && std::getline(mounts, rest);)
    if (point.starts_with(directory.string() + "/")) found += point + "\n";
  return found;
}

// A pod deleted: its node and its keeper are stopped gracefully at once. No mount stays behind
// under the node's state directory, dead or alive.
TEST_F(CacheNodeProcessTest, AGracefulStopOfTheNodeAndItsKeeperLeavesNoMount) {
  if (!canMount()) GTEST_SKIP() << "FUSE mounts need root and /dev/fuse";
  KeeperProcess keeper(root_ / "keeper.sock");
  NodeProcess& node = addNode("n1", nullptr, keeper.socket().string());
  ASSERT_TRUE(ensureReady(node));
  const auto target = root_ / "pods" / "uid-a" / "volumes" / "data";
  ASSERT_TRUE(publishVolume(node, target).ok()) << node.log();
  const auto mounts = root_ / "n1" / "mounts";
  ASSERT_NE(mountsUnder(mounts), "");
  std::thread keeperStop([&] {
    std::this_thread::sleep_for(200ms);
    keeper.stop();
  });
  node.kill(SIGTERM);
  keeperStop.join();
  EXPECT_EQ(mountsUnder(mounts), "") << node.log();
  EXPECT_NE(node.log().find("the keeper is gone: dataset unmounted"), std::string::npos)
      << node.log();
  ::umount2(target.c_str(), MNT_DETACH);  // the pod's view, which its kubelet unpublishes
}

// Without a keeper a killed node's mounts die with it; once the dataset is ensured again, the
// restarted node binds the pods' views again, and new reads see every byte.
TEST_F(CacheNodeProcessTest, PodViewsAreBoundAgainAfterARestartWithoutAKeeper) {
  if (!canMount()) GTEST_SKIP() << "FUSE mounts need root and /dev/fuse";
  NodeProcess& node = addNode("n1");
  ASSERT_TRUE(ensureReady(node));
  const auto target = root_ / "pods" / "uid-a" / "volumes" / "data";
  ASSERT_TRUE(publishVolume(node, target).ok()) << node.log();

  node.kill(SIGKILL);
  struct statvfs vfs;
  EXPECT_NE(::statvfs(target.c_str(), &vfs), 0);
  EXPECT_EQ(errno, ENOTCONN) << "the pod's view died with the node";
  node.start();
  ASSERT_TRUE(ensureReady(node));
  for (const auto& [path, data] : files_) {
    std::ifstream in(target / path, std::ios::binary);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), data) << path;
  }
  EXPECT_NE(node.log().find("volume repaired"), std::string::npos) << node.log();
  // The pod's running containers keep the dead copy: the node names the pod until it ends.
  const v1::DatasetStatus status = statusOf(node);
  ASSERT_EQ(status.cut_off_readers_size(), 1) << status.DebugString();
  EXPECT_EQ(status.cut_off_readers(0).pod_namespace(), "ml");
  EXPECT_EQ(status.cut_off_readers(0).pod_name(), "worker-0");
  EXPECT_EQ(status.cut_off_readers(0).pod_uid(), "uid-a");
  EXPECT_GT(status.cut_off_readers(0).since().seconds(), 0);
  std::string metrics;
  ASSERT_EQ(testing::httpGet("http://127.0.0.1:" + std::to_string(node.metricsPort()) + "/metrics",
                             metrics),
            200);
  EXPECT_NE(metrics.find("granary_dataset_readers_cut_off{dataset=\"ml/coco\"} 1"),
            std::string::npos);
  ASSERT_TRUE(unpublishVolume(node, target).ok());  // the pod restarted (or ended)
  EXPECT_EQ(statusOf(node).cut_off_readers_size(), 0);
}

// Mount recovery is on by default: the node says at start, in one line, whether this kernel lets
// dataset mounts outlive its restarts, and where it cannot, why; turned off, it says so too.
TEST_F(CacheNodeProcessTest, SaysAtStartWhetherDatasetMountsOutliveARestart) {
  NodeProcess& node = addNode("n1");
  const std::string line = logLine(node, "mount recovery");
  utsname kernel{};
  ASSERT_EQ(::uname(&kernel), 0);
  int major = 0, minor = 0;
  std::sscanf(kernel.release, "%d.%d", &major, &minor);
  // FUSE_NOTIFY_RESEND came with Linux 6.9 (a distribution may backport it earlier).
  if (canMount() && std::pair(major, minor) >= std::pair(6, 9)) {
    EXPECT_NE(line.find("mount recovery on"), std::string::npos) << node.log();
    EXPECT_NE(line.find((root_ / "n1" / "state" / "mount-keeper.sock").string()), std::string::npos)
        << "the keeper's default socket: " << line;
  } else {
    EXPECT_NE(line.find("mount recovery off"), std::string::npos) << node.log();
    EXPECT_NE(line.find("reason="), std::string::npos) << line;
  }
  const auto count = [&](const std::string& text) {
    const std::string log = node.log();
    int n = 0;
    for (auto at = log.find(text); at != std::string::npos; at = log.find(text, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("mount recovery"), 1) << "one line";
  // Passthrough, said once either way: on where the kernel offers it (Linux 6.9+), else why not.
  // Said after a probe mount, which may come after the node serves: awaited.
  EXPECT_FALSE(logLine(node, "msg=\"passthrough o").empty()) << node.log();
  EXPECT_EQ(count("msg=\"passthrough o"), 1) << node.log();
  if (!canMount()) {
    EXPECT_NE(logLine(node, "passthrough off").find("reason="), std::string::npos) << node.log();
  }

  NodeProcess off(root_ / "n2", "n2");
  std::ofstream(root_ / "n2" / "config.yaml", std::ios::app) << "mountKeeper: false\n";
  off.start();
  EXPECT_NE(logLine(off, "mount recovery").find("mount recovery off"), std::string::npos)
      << off.log();
  EXPECT_NE(logLine(off, "mount recovery").find("mountKeeper: false"), std::string::npos);
}

// A pod's containers start one after another: the node's first, its keeper's after. The node
// waits for the keeper without holding anything up, hands it the mount made meanwhile, says so
// once, and a node killed later finds the mount there: the pod's view stays the same mount and
// reads every byte.
TEST_F(CacheNodeProcessTest, AKeeperStartingAfterTheNodeTakesTheMountsMadeBeforeIt) {
  if (!canMount()) GTEST_SKIP() << "FUSE mounts need root and /dev/fuse";
  const auto socket = root_ / "keeper.sock";
  std::optional<KeeperProcess> keeper;  // stopped after the node
  NodeProcess& node = addNode("n1", nullptr, socket.string());
  if (logLine(node, "mount recovery").find("mount recovery on") == std::string::npos)
    GTEST_SKIP() << "this kernel cannot keep mounts: " << logLine(node, "mount recovery");
  ASSERT_TRUE(ensureReady(node));
  const auto target = root_ / "pods" / "uid-a" / "volumes" / "data";
  ASSERT_TRUE(publishVolume(node, target).ok()) << node.log();  // before the keeper runs
  const int mountId = mountIdOf(target);
  keeper.emplace(socket);
  EXPECT_NE(logLine(node, "mount keeper reached").find("mounts_handed_over=1"), std::string::npos)
      << node.log();

  node.kill(SIGKILL);
  node.start();
  ASSERT_TRUE(ensureReady(node));
  for (const auto& [path, data] : files_) {
    std::ifstream in(target / path, std::ios::binary);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), data) << path;
  }
  EXPECT_EQ(mountIdOf(target), mountId) << "the pod kept the same mount";
  EXPECT_NE(logLine(node, "dataset mount adopted"), "") << node.log();
  for (const char* never : {"no mount keeper", "did not take the mount", "volume repaired"})
    EXPECT_EQ(node.log().find(never), std::string::npos) << never << " in:\n" << node.log();
}

// The whole of an open file, read with pread.
std::string preadWhole(int fd) {
  std::string out;
  char buffer[1 << 16];
  for (ssize_t n; (n = ::pread(fd, buffer, sizeof buffer, static_cast<off_t>(out.size()))) > 0;)
    out.append(buffer, static_cast<size_t>(n));
  return out;
}

// Files passed through (the kernel reads their chunk files itself) across a kill -9 of the node:
// the files a pod holds open read right while no node runs at all, and after the restart the
// adopting node opens the very same files again beside them (the kernel refuses an open that
// mixes the ways a file is read: the new opens take one that mixes with any) and reads right.
TEST_F(CacheNodeProcessTest, FilesPassedThroughStayReadableAcrossARestart) {
  if (!canMount()) GTEST_SKIP() << "FUSE mounts need root and /dev/fuse";
  KeeperProcess keeper(root_ / "keeper.sock");
  nodes_.push_back(
      std::make_unique<NodeProcess>(root_ / "n1", "n1", nullptr, keeper.socket().string()));
  NodeProcess& node = *nodes_.back();
  std::ofstream(root_ / "n1" / "config.yaml", std::ios::app)
      << "passthroughMinAverageFileSize: 0\n";  // these files are small
  node.start();
  if (logLine(node, "passthrough ").find("passthrough on") == std::string::npos)
    GTEST_SKIP() << "no passthrough here: " << logLine(node, "passthrough ");
  if (logLine(node, "mount recovery").find("mount recovery on") == std::string::npos)
    GTEST_SKIP() << "this kernel cannot keep mounts: " << logLine(node, "mount recovery");
  ASSERT_TRUE(ensureReady(node));
  const auto target = root_ / "pods" / "uid-a" / "volumes" / "data";
  ASSERT_TRUE(publishVolume(node, target).ok()) << node.log();
  std::map<std::string, int> held;
  for (const auto& [path, data] : files_) {
    held[path] = ::open((target / path).c_str(), O_RDONLY);
    ASSERT_GE(held[path], 0) << path;
    EXPECT_TRUE(preadWhole(held[path]) == data) << path;
  }
  EXPECT_NE(logLine(node, "files cached whole are passed through"), "") << node.log();

  node.kill(SIGKILL);
  ::sync();
  ASSERT_EQ(::system("echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; true"), 0);
  // Read while no node runs: only the files passed through can be (not the big one, which spans
  // chunks and is read through the page cache).
  const auto readHeldFiles = [&] {
    for (const auto& [path, data] : files_) {
      if (path.starts_with("train/")) {
        EXPECT_TRUE(preadWhole(held.at(path)) == data) << path;
      }
    }
  };
  auto whileDown = std::async(std::launch::async, readHeldFiles);
  const bool readWhileDown = whileDown.wait_for(20s) == std::future_status::ready;
  node.start();
  v1::EnsureDatasetResponse ensured;
  ASSERT_TRUE(node.api().EnsureDataset(authorized().get(), ensureRequest(), &ensured).ok());
  whileDown.wait();
  EXPECT_TRUE(readWhileDown) << "files passed through read with no node running";

  for (const auto& [path, data] : files_) {  // opened again beside the files still open
    const int again = ::open((target / path).c_str(), O_RDONLY);
    ASSERT_GE(again, 0) << path << ": " << std::strerror(errno) << node.log();
    EXPECT_TRUE(preadWhole(again) == data) << path;
    ::close(again);
    EXPECT_TRUE(preadWhole(held[path]) == data) << path;
    ::close(held[path]);
  }
  for (const auto& [path, data] : files_) {  // and once none is open from before
    std::ifstream in(target / path, std::ios::binary);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), data) << path;
  }
  EXPECT_NE(logLine(node, "dataset mount adopted"), "") << node.log();
}

// A keeper that never comes is waited for mountKeeperWaitSeconds, then named once with the fix.
TEST_F(CacheNodeProcessTest, AKeeperThatNeverComesIsReportedOnceAfterTheWait) {
  NodeProcess node(root_ / "n1", "n1", nullptr, (root_ / "keeper.sock").string());
  std::ofstream(root_ / "n1" / "config.yaml", std::ios::app) << "mountKeeperWaitSeconds: 1\n";
  node.start();
  if (logLine(node, "mount recovery").find("mount recovery on") == std::string::npos)
    GTEST_SKIP() << "this kernel cannot keep mounts: " << logLine(node, "mount recovery");
  const std::string line = logLine(node, "no mount keeper");
  for (const char* needed : {"level=warn", "waited=1.000s", "fix=", "--serve-mount-keeper"})
    EXPECT_NE(line.find(needed), std::string::npos) << needed << " in: " << line;
  const std::string log = node.log();
  EXPECT_EQ(log.find("no mount keeper"), log.rfind("no mount keeper")) << "once:\n" << log;
  EXPECT_EQ(log.find("mount keeper reached"), std::string::npos) << log;
}

// The directories the chart mounts with mountPropagation: Bidirectional (sharedMounts): on a
// private mount the node says at start what to do and is not ready; on a shared one it is.
TEST_F(CacheNodeProcessTest, APrivateMountWhereMountsMustPropagateLeavesTheNodeNotReady) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a tmpfs needs root";
  const auto host = root_ / "host";
  std::filesystem::create_directories(host);
  ASSERT_EQ(::mount("tmpfs", host.c_str(), "tmpfs", 0, "size=1m"), 0);
  ASSERT_EQ(::mount(nullptr, host.c_str(), nullptr, MS_PRIVATE, nullptr), 0);
  const auto readyz = [](const NodeProcess& node, std::string& body) {
    return testing::httpGet("http://127.0.0.1:" + std::to_string(node.metricsPort()) + "/readyz",
                            body);
  };
  const auto start = [&](const std::string& name) {
    auto node = std::make_unique<NodeProcess>(root_ / name, name);
    std::ofstream(root_ / name / "config.yaml", std::ios::app)
        << "sharedMounts: [" << (host / "kubelet" / "pods") << "]\n";
    node->start();
    return node;
  };

  auto onPrivate = start("n1");
  const std::string line = logLine(*onPrivate, "not ready");
  for (const std::string& needed :
       std::vector<std::string>{(host / "kubelet" / "pods").string(), "private mount",
                                "mount --make-rshared", "docs/install.md"})
    EXPECT_NE(line.find(needed), std::string::npos) << needed << " in: " << line;
  std::string body;
  eventually([&] { return readyz(*onPrivate, body = "") != 0; }, 10s);
  EXPECT_EQ(readyz(*onPrivate, body = ""), 503);
  EXPECT_NE(body.find("mount --make-rshared"), std::string::npos) << body;
  onPrivate->kill(SIGTERM);

  ASSERT_EQ(::mount(nullptr, host.c_str(), nullptr, MS_SHARED, nullptr), 0);
  auto onShared = start("n2");
  eventually([&] { return readyz(*onShared, body = "") == 200; }, 10s);
  EXPECT_EQ(readyz(*onShared, body = ""), 200) << body << onShared->log();
  EXPECT_EQ(onShared->log().find("not ready"), std::string::npos) << onShared->log();
}

TEST_F(CacheNodeProcessTest, HelpSaysWhatMountRecoveryNeeds) {
  FILE* help = ::popen(GRANARY_CACHE_NODE_BINARY " --help", "r");
  ASSERT_NE(help, nullptr);
  std::string text;
  for (char buffer[4096]; const size_t got = std::fread(buffer, 1, sizeof buffer, help);)
    text.append(buffer, got);
  EXPECT_EQ(::pclose(help), 0);
  for (const char* needed : {"--mount-keeper-socket", "on by default", "/dev/fuse",
                             "FUSE_NOTIFY_RESEND", "Linux 6.9+", "--no-mount-keeper"})
    EXPECT_NE(text.find(needed), std::string::npos) << needed << " in:\n" << text;
}

}  // namespace
}  // namespace granary::cache

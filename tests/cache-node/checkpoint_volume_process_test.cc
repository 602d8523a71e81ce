// A TrainingJob's checkpoint volume through real granary-cache-node processes and their CSI
// sockets, as the kubelet publishes it: the workers' writes land in the node's tree at the
// disk's speed, drain to a file:// origin (or the S3 test server, with the Secret's credentials)
// byte for byte with markers after the files they name; a node elsewhere restores every file; a
// node killed mid-drain, or handing the node over to a new pod, has its drain resumed; a full
// disk fails the write and loses nothing; bad input is refused naming the attribute; a node's
// files copied to its peer survive the node's loss and reach the origin from the peer.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>

#include "common/owned_fd.h"
#include "csi/v1/csi.grpc.pb.h"
#include "tests/support/cache_node_process.h"
#include "tests/support/eventually.h"
#include "tests/support/http_get.h"
#include "tests/support/s3rver.h"

namespace granary::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

std::string readAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string randomBytes(size_t size, unsigned seed) {
  std::mt19937 random(seed);
  std::string bytes(size, '\0');
  for (char& c : bytes) c = static_cast<char>(random());
  return bytes;
}

// A tree's files, relative path to bytes; a failing comparison prints paths and sizes, not bytes.
struct Tree : std::map<std::string, std::string> {
  using std::map<std::string, std::string>::map;
};
void PrintTo(const Tree& tree, std::ostream* out) {
  *out << "{";
  for (const auto& [path, bytes] : tree) *out << " " << path << " (" << bytes.size() << " bytes)";
  *out << " }";
}

// A file a rank keeps open for writing, as its own process would: not inherited by the node
// processes the test starts meanwhile (O_CLOEXEC), so that its close is the last.
OwnedFd openForWriting(const fs::path& path, const std::string& bytes) {
  OwnedFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd) {
    EXPECT_EQ(::write(fd.get(), bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }
  return fd;
}

// What the kubelet sends for a worker's checkpoint volume (the operator's volumeAttributes).
csi::v1::NodePublishVolumeRequest checkpointRequest(const fs::path& target,
                                                    std::map<std::string, std::string> attributes,
                                                    const std::string& pod = "bert-worker-0",
                                                    const std::string& ns = "ml") {
  csi::v1::NodePublishVolumeRequest request;
  request.set_volume_id("csi-" + pod);
  request.set_target_path(target.string());
  request.mutable_volume_capability()->mutable_mount();
  attributes.insert({{"csi.storage.k8s.io/ephemeral", "true"},
                     {"csi.storage.k8s.io/pod.namespace", ns},
                     {"csi.storage.k8s.io/pod.name", pod},
                     {"csi.storage.k8s.io/pod.uid", "uid-" + pod}});
  request.mutable_volume_context()->insert(attributes.begin(), attributes.end());
  return request;
}

grpc::Status publish(NodeProcess& node, const csi::v1::NodePublishVolumeRequest& request) {
  auto channel = grpc::CreateChannel(node.csiAddress(), grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + 10s))
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "no CSI socket");
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 60s);
  csi::v1::NodePublishVolumeResponse response;
  return csi::v1::Node::NewStub(channel)->NodePublishVolume(&context, request, &response);
}

// The series `name` for the test's volume, from the node's /metrics; -1 when absent.
// The value of the series `name{labels}` on `node`; -1 when it has none.
double seriesOf(const NodeProcess& node, const std::string& name, const std::string& labels) {
  std::string body;
  if (httpGet("http://127.0.0.1:" + std::to_string(node.metricsPort()) + "/metrics", body) != 200)
    return -1;
  const std::string prefix = name + "{" + labels + "} ";
  const size_t at = body.find(prefix);
  return at == std::string::npos ? -1 : std::stod(body.substr(at + prefix.size()));
}

double series(const NodeProcess& node, const std::string& name, const std::string& uri) {
  return seriesOf(node, name, "namespace=\"ml\",uri=\"" + uri + "\"");
}

class CheckpointVolumeProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "bind mounts need root";
    root_ = fs::temp_directory_path() /
            ("granary-ckpt-volume-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(origin());
    fs::create_directories(root_ / "datasets" / "coco");
  }
  void TearDown() override {
    nodes_.clear();
    for (const auto& target : targets_) ::umount2(target.c_str(), MNT_DETACH);
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }

  // `checkpointRoots`: the node's checkpointOriginRoots, a YAML flow list's items; by default the
  // shared root of origin().
  NodeProcess& startNode(const std::string& name, const fs::path& stateRoot = "",
                         const std::string& checkpointRoots = "") {
    const fs::path home = root_ / (name + "-" + std::to_string(nodes_.size()));
    auto node = std::make_unique<NodeProcess>(home, name, nullptr, "", stateRoot);
    std::ofstream(home / "config.yaml", std::ios::app)
        << "checkpointOriginRoots: ["
        << (checkpointRoots.empty() ? sharedRoot(root_ / "origins") : checkpointRoots)
        << "]\nfileOriginRoots: ["
        << sharedRoot(root_ / "datasets") << "]\nmountKeeper: false\n";
    node->start();
    nodes_.push_back(std::move(node));
    return *nodes_.back();
  }
  fs::path target(const std::string& name) {
    targets_.push_back(root_ / "pods" / name / "volumes" / "ckpt");
    return targets_.back();
  }
  fs::path origin() const { return root_ / "origins" / "runs" / "bert"; }
  std::string uri() const { return "file://" + origin().string(); }

  // Every file below `dir`, relative, with its bytes; the staging directory left out.
  static Tree filesOf(const fs::path& dir) {
    Tree out;
    std::error_code error;
    for (auto it = fs::recursive_directory_iterator(dir, error);
         !error && it != fs::recursive_directory_iterator(); it.increment(error)) {
      const std::string relative = fs::relative(it->path(), dir).string();
      if (relative.starts_with(".granary-staging")) continue;
      if (it->is_regular_file()) out[relative] = readAll(it->path());
    }
    return out;
  }

  // A DCP-style save from two ranks: a file a rank, then .metadata written aside and renamed
  // into place, then `latest` naming the step.
  Tree save(const fs::path& mount, int step, size_t bytes) {
    const fs::path dir = mount / ("step-" + std::to_string(step));
    fs::create_directories(dir);
    Tree written;
    for (int rank = 0; rank < 2; ++rank) {
      const std::string name = "__" + std::to_string(rank) + "_0.distcp";
      written[dir.filename().string() + "/" + name] = randomBytes(bytes, step * 10 + rank);
      std::ofstream(dir / name, std::ios::binary) << written[dir.filename().string() + "/" + name];
    }
    std::ofstream(dir / ".metadata.tmp") << "step " << step;
    fs::rename(dir / ".metadata.tmp", dir / ".metadata");
    written[dir.filename().string() + "/.metadata"] = "step " + std::to_string(step);
    std::ofstream(mount / "latest.tmp") << step;
    fs::rename(mount / "latest.tmp", mount / "latest");
    written["latest"] = std::to_string(step);
    return written;
  }

  fs::path root_;
  std::vector<std::unique_ptr<NodeProcess>> nodes_;
  std::vector<fs::path> targets_;
};

TEST_F(CheckpointVolumeProcessTest, WritesDrainToTheOriginAndANodeElsewhereRestoresEveryFile) {
  NodeProcess& first = startNode("n1");
  const fs::path rank0 = target("rank-0"), rank1 = target("rank-1");
  const auto attributes = std::map<std::string, std::string>{{"checkpoints", uri()}};
  ASSERT_TRUE(publish(first, checkpointRequest(rank0, attributes)).ok()) << first.log();
  ASSERT_TRUE(publish(first, checkpointRequest(rank1, attributes, "bert-worker-1")).ok());
  ASSERT_TRUE(publish(first, checkpointRequest(rank1, attributes, "bert-worker-1")).ok())
      << "publishing again (the kubelet's requiresRepublish) changes nothing";

  // Both workers on the node see one tree, read-write.
  Tree written = save(rank0, 10, 3 << 20);
  EXPECT_EQ(filesOf(rank1), written) << "the other worker sees rank 0's files";
  std::ofstream(rank1 / "step-10" / "extra.pt") << "rank 1's own";
  written["step-10/extra.pt"] = "rank 1's own";

  ASSERT_TRUE(eventually([&] { return filesOf(origin()) == written; }, 30s))
      << "origin holds " << filesOf(origin()).size() << " files; log:\n"
      << first.log();
  ASSERT_TRUE(eventually(
      [&] { return series(first, "granary_checkpoint_upload_lag_seconds", uri()) == 0; }, 10s));
  EXPECT_GE(series(first, "granary_checkpoint_uploaded_bytes_total", uri()), 6 << 20);
  EXPECT_GE(series(first, "granary_checkpoint_written_bytes_total", uri()), 6 << 20);

  // The gang restarted on another node: its volume is restored from the origin.
  NodeProcess& second = startNode("n2");
  const fs::path elsewhere = target("rank-0-again");
  ASSERT_TRUE(publish(second, checkpointRequest(elsewhere, attributes)).ok()) << second.log();
  EXPECT_EQ(filesOf(elsewhere), written);

  // A worker's end unbinds its view only; the volume and the origin keep every file.
  auto channel = grpc::CreateChannel(first.csiAddress(), grpc::InsecureChannelCredentials());
  csi::v1::NodeUnpublishVolumeRequest unpublish;
  unpublish.set_volume_id("csi-bert-worker-0");
  unpublish.set_target_path(rank0.string());
  grpc::ClientContext context;
  csi::v1::NodeUnpublishVolumeResponse response;
  ASSERT_TRUE(
      csi::v1::Node::NewStub(channel)->NodeUnpublishVolume(&context, unpublish, &response).ok());
  EXPECT_FALSE(fs::exists(rank0));
  EXPECT_EQ(filesOf(rank1), written);
  EXPECT_EQ(filesOf(origin()), written);
}

TEST_F(CheckpointVolumeProcessTest, ANodeKilledMidDrainFinishesItFromItsRecordAfterARestart) {
  NodeProcess& node = startNode("n1");
  const fs::path mount = target("rank-0");
  // 512 KiB/s: the 6 MiB save is still draining when the node is killed.
  ASSERT_TRUE(publish(node, checkpointRequest(
                                mount, {{"checkpoints", uri()}, {"bandwidthLimit", "524288"}}))
                  .ok())
      << node.log();
  Tree written = save(mount, 20, 3 << 20);
  // A rank still writing its optimizer state: the drain cannot finish before the kill, however
  // slow the machine.
  OwnedFd optimizer = openForWriting(mount / "step-20" / "optimizer.pt", "half of it");
  ASSERT_TRUE(optimizer);
  ASSERT_TRUE(eventually(
      [&] { return series(node, "granary_checkpoint_uploaded_bytes_total", uri()) > 0; }, 20s));
  const fs::path stateRoot = root_ / "n1-0";
  node.kill(SIGKILL);
  EXPECT_FALSE(filesOf(origin()).contains("step-20/optimizer.pt")) << "never a file in part";
  // Never a marker before the files it names.
  const auto atOrigin = filesOf(origin());
  if (atOrigin.contains("step-20/.metadata")) {
    for (const char* rank : {"step-20/__0_0.distcp", "step-20/__1_0.distcp"})
      EXPECT_EQ(atOrigin.contains(rank) ? atOrigin.at(rank) : "", written.at(rank)) << rank;
  }
  if (atOrigin.contains("latest")) {
    EXPECT_TRUE(atOrigin.contains("step-20/.metadata"));
  }

  // The bind mount is the kernel's: the worker wrote on while no node ran.
  std::ofstream(mount / "step-20" / "late.pt") << "written while the node was down";
  const std::string rest = ", the rest while the node was down";
  ASSERT_EQ(::write(optimizer.get(), rest.data(), rest.size()), static_cast<ssize_t>(rest.size()));
  optimizer = OwnedFd();  // the close
  Tree expected = written;
  expected["step-20/late.pt"] = "written while the node was down";
  expected["step-20/optimizer.pt"] = "half of it, the rest while the node was down";

  NodeProcess& again = startNode("n1", stateRoot);
  ASSERT_TRUE(eventually([&] { return filesOf(origin()) == expected; }, 60s))
      << "the restarted node resumes the recorded volume without a publish; log:\n"
      << again.log();
}

// A new pod of the cache node takes the node over (a helm upgrade): the old one stops its drain
// as it hands over, the new one resumes it from the record, the workers write on throughout, and
// the kubelet's next publish (requiresRepublish) finds the volume bound.
TEST_F(CheckpointVolumeProcessTest, ANewPodTakingTheNodeOverResumesTheDrain) {
  NodeProcess& old = startNode("n1");
  const fs::path stateRoot = root_ / "n1-0";
  const fs::path mount = target("rank-0");
  const auto attributes =
      std::map<std::string, std::string>{{"checkpoints", uri()}, {"bandwidthLimit", "1048576"}};
  ASSERT_TRUE(publish(old, checkpointRequest(mount, attributes)).ok()) << old.log();
  Tree expected = save(mount, 30, 3 << 20);
  // A rank still writing across the handover: the drain is still going when the node changes
  // hands, however slow the machine.
  OwnedFd optimizer = openForWriting(mount / "step-30" / "optimizer.pt", "begun under the old pod");
  ASSERT_TRUE(optimizer);
  ASSERT_TRUE(eventually(
      [&] { return series(old, "granary_checkpoint_uploaded_bytes_total", uri()) > 0; }, 20s));

  NodeProcess& successor = startNode("n1", stateRoot);  // asks the old pod for the node
  EXPECT_NE(successor.log().find("released the node"), std::string::npos) << successor.log();
  EXPECT_FALSE(filesOf(origin()).contains("step-30/optimizer.pt")) << "never a file in part";
  const std::string end = ", ended under the new one";
  ASSERT_EQ(::write(optimizer.get(), end.data(), end.size()), static_cast<ssize_t>(end.size()));
  optimizer = OwnedFd();  // the close
  expected["step-30/optimizer.pt"] = "begun under the old pod, ended under the new one";
  std::ofstream(mount / "step-30" / "after.pt") << "written under the new pod";
  expected["step-30/after.pt"] = "written under the new pod";
  ASSERT_TRUE(publish(successor, checkpointRequest(mount, attributes)).ok()) << successor.log();
  EXPECT_EQ(filesOf(mount), expected) << "one bind mount throughout, not a second over it";
  ASSERT_TRUE(eventually([&] { return filesOf(origin()) == expected; }, 60s))
      << ::testing::PrintToString(filesOf(origin())) << "\n"
      << successor.log();
  old.kill(SIGTERM);
}

// A disk full of checkpoints: the node drops files the origin holds, oldest first, to make room
// for the next save; when nothing is left to drop the worker's write fails with ENOSPC (the
// kernel's own), the node reports the disk full in its telemetry, and every file closed before is
// whole at the origin.
TEST_F(CheckpointVolumeProcessTest, AFullDiskEvictsWhatIsUploadedThenFailsTheWrite) {
  const fs::path cache = root_ / "n1-0" / "cache";
  fs::create_directories(cache);
  ASSERT_EQ(::mount("tmpfs", cache.c_str(), "tmpfs", 0, "size=48m"), 0) << std::strerror(errno);
  targets_.push_back(cache);  // unmounted at the end
  NodeProcess& node = startNode("n1");
  const fs::path mount = target("rank-0");
  ASSERT_TRUE(publish(node, checkpointRequest(mount, {{"checkpoints", uri()}})).ok()) << node.log();
  Tree written = save(mount, 10, 12 << 20);
  ASSERT_TRUE(eventually([&] { return filesOf(origin()) == written; }, 30s));
  // The disk is below its margin (256 MiB or 1%): what the origin holds goes from the volume.
  ASSERT_TRUE(eventually([&] { return !fs::exists(mount / "step-10" / "__0_0.distcp"); }, 20s))
      << node.log();
  EXPECT_TRUE(eventually(
      [&] { return series(node, "granary_checkpoint_evicted_bytes_total", uri()) >= 24 << 20; },
      10s));
  EXPECT_NE(node.log().find("to make room"), std::string::npos);

  // 36 MiB fit only because the 24 MiB at the origin went: the next save runs.
  const std::string next = randomBytes(36 << 20, 5);
  fs::create_directories(mount / "step-20");
  std::FILE* fits = std::fopen((mount / "step-20" / "__0_0.distcp").c_str(), "wb");
  ASSERT_NE(fits, nullptr);
  EXPECT_EQ(std::fwrite(next.data(), 1, next.size(), fits), next.size());
  EXPECT_EQ(std::fclose(fits), 0) << "the save that needed the room: " << std::strerror(errno);
  written["step-20/__0_0.distcp"] = next;

  // One larger than the disk: nothing at the origin is left to drop, and it fails.
  std::FILE* out = std::fopen((mount / "step-30.bin").c_str(), "wb");
  ASSERT_NE(out, nullptr);
  const std::string block = randomBytes(1 << 20, 7);
  int error = 0;
  for (int i = 0; i < 64 && error == 0; ++i)
    if (std::fwrite(block.data(), 1, block.size(), out) != block.size() || std::fflush(out) != 0)
      error = errno;
  std::fclose(out);
  EXPECT_EQ(error, ENOSPC) << "the save fails as the disk's own write would";

  v1::GetTelemetryResponse telemetry;
  ASSERT_TRUE(eventually(
      [&] {
        grpc::ClientContext context;
        context.AddMetadata("authorization", std::string("Bearer ") + kToken);
        return node.api().GetTelemetry(&context, {}, &telemetry).ok() &&
               telemetry.checkpoint_volumes_size() == 1 &&
               telemetry.checkpoint_volumes(0).disk_full();
      },
      10s))
      << telemetry.DebugString();
  // Every file closed before the failed write is whole at the origin.
  ASSERT_TRUE(eventually(
      [&] {
        const auto atOrigin = filesOf(origin());
        for (const auto& [path, bytes] : written)
          if (!atOrigin.contains(path) || atOrigin.at(path) != bytes) return false;
        return true;
      },
      30s))
      << node.log();
}

// An s3:// volume with the credentials of its Secret, as the kubelet hands them over: drained to
// the S3 test server, its record on the node without them, and after a restart resumed once the
// kubelet publishes it again with them (requiresRepublish).
TEST_F(CheckpointVolumeProcessTest, AnS3VolumeTakesItsSecretFromThePublishAndKeepsItThere) {
  std::string skip;
  auto bucket = cache::S3rver::start(GRANARY_SOURCE_DIR, skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  ASSERT_TRUE(bucket.isOk()) << bucket.status();
  const std::string endpoint = (*bucket)->endpoint();
  const auto atOrigin = [&](const std::string& path) {
    std::string body;
    return httpGet(endpoint + "/data/runs/bert/" + path, body) == 200 ? body : "";
  };
  NodeProcess& node = startNode("n1");
  const fs::path stateRoot = root_ / "n1-0";
  const fs::path mount = target("rank-0");
  auto request =
      checkpointRequest(mount, {{"checkpoints", "s3://data/runs/bert/"}, {"endpoint", endpoint}});
  request.mutable_secrets()->insert({{"accessKeyId", "S3RVER"}, {"secretAccessKey", "S3RVER"}});
  ASSERT_TRUE(publish(node, request).ok()) << node.log();
  Tree written = save(mount, 10, 1 << 20);
  ASSERT_TRUE(eventually(
      [&] {
        for (const auto& [path, bytes] : written)
          if (atOrigin(path) != bytes) return false;
        return true;
      },
      30s))
      << node.log();
  for (const auto& entry : fs::recursive_directory_iterator(stateRoot / "cache" / "checkpoints")) {
    if (entry.path().filename() == "volume") {
      EXPECT_EQ(readAll(entry.path()).find("S3RVER"), std::string::npos)
          << "the node keeps no credentials: " << readAll(entry.path());
    }
  }
  EXPECT_EQ(node.log().find("S3RVER"), std::string::npos);

  node.kill(SIGKILL);
  NodeProcess& again = startNode("n1", stateRoot);
  std::ofstream(mount / "step-10" / "after.pt") << "written across the restart";
  // The restarted node knows the volume from its record but, without credentials, has not
  // opened it: it reports the volume with no drain, and nothing goes up.
  v1::GetTelemetryResponse telemetry;
  ASSERT_TRUE(eventually([&] {
    grpc::ClientContext context;
    context.AddMetadata("authorization", std::string("Bearer ") + kToken);
    return again.api().GetTelemetry(&context, {}, &telemetry).ok() &&
           telemetry.checkpoint_volumes_size() == 1;
  }));
  EXPECT_EQ(telemetry.checkpoint_volumes(0).uri(), "s3://data/runs/bert/");
  EXPECT_FALSE(telemetry.checkpoint_volumes(0).restoring());
  EXPECT_EQ(telemetry.checkpoint_volumes(0).checkpoints_size(), 0) << "not open: no drain";
  EXPECT_EQ(atOrigin("step-10/after.pt"), "") << "no credentials yet: nothing goes up";
  ASSERT_TRUE(publish(again, request).ok()) << again.log();  // the kubelet's next publish
  EXPECT_TRUE(
      eventually([&] { return atOrigin("step-10/after.pt") == "written across the restart"; }, 30s))
      << again.log();
}

grpc::Status setPeers(NodeProcess& node, const std::string& uri,
                      const std::vector<const NodeProcess*>& peers,
                      const std::vector<std::string>& lost = {}) {
  v1::SetCheckpointPeersRequest request;
  request.set_namespace_("ml");
  request.set_uri(uri);
  for (const NodeProcess* peer : peers) {
    v1::NodeEndpoint& endpoint = *request.add_peers();
    endpoint.set_node_name(peer->name());
    endpoint.set_address(peer->address());
  }
  for (const std::string& name : lost) request.add_lost_nodes(name);
  grpc::ClientContext context;
  context.AddMetadata("authorization", std::string("Bearer ") + kToken);
  v1::SetCheckpointPeersResponse response;
  return node.api().SetCheckpointPeers(&context, request, &response);
}

// Two nodes of a job copy their closed files to each other. The writer's node is killed (kill -9,
// its disk gone with it) before its slow origin has them: the operator says it is lost, and its
// peer uploads every file, markers last; a node elsewhere then restores every byte.
TEST_F(CheckpointVolumeProcessTest, ALostNodesFilesReachTheOriginFromItsPeer) {
  NodeProcess& writer = startNode("n1");
  NodeProcess& peer = startNode("n2");
  // 256 KiB/s: the 2 MiB save is still draining when the writer's node is lost.
  const auto attributes =
      std::map<std::string, std::string>{{"checkpoints", uri()}, {"bandwidthLimit", "262144"}};
  const fs::path mount = target("rank-0"), peerMount = target("rank-1");
  ASSERT_TRUE(publish(writer, checkpointRequest(mount, attributes)).ok()) << writer.log();
  ASSERT_TRUE(publish(peer, checkpointRequest(peerMount, attributes, "bert-worker-1")).ok());
  ASSERT_TRUE(setPeers(writer, uri(), {&peer}).ok());
  ASSERT_TRUE(setPeers(peer, uri(), {&writer}).ok());
  EXPECT_EQ(setPeers(writer, "file:///elsewhere/", {&peer}).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION)
      << "a volume the node has not opened";

  const Tree written = save(mount, 40, 1 << 20);
  ASSERT_TRUE(eventually([&] { return filesOf(peerMount) == written; }, 20s))
      << "the peer's workers see the copies; log:\n"
      << writer.log();
  v1::GetTelemetryResponse telemetry;
  ASSERT_TRUE(eventually([&] {
    grpc::ClientContext context;
    context.AddMetadata("authorization", std::string("Bearer ") + kToken);
    return peer.api().GetTelemetry(&context, {}, &telemetry).ok() &&
           telemetry.checkpoint_volumes_size() == 1 &&
           telemetry.checkpoint_volumes(0).held_files() > 0;
  }));
  EXPECT_EQ(telemetry.checkpoint_volumes(0).written_bytes(), 0) << "copies are not written there";
  ASSERT_TRUE(eventually(
      [&] { return series(writer, "granary_checkpoint_copied_bytes_total", uri()) >= 2 << 20; }));
  // The copies crossed the data plane.
  EXPECT_GE(seriesOf(writer, "granary_peer_sent_bytes_total", "peer=\"n2\""), 2 << 20);
  EXPECT_GE(seriesOf(peer, "granary_peer_received_bytes_total", "peer=\"n1\""), 2 << 20);

  const std::string writerAddress = writer.address();
  writer.kill(SIGKILL);
  std::error_code ignored;
  fs::remove_all(root_ / "n1-0" / "cache" / "checkpoints", ignored);  // the node's disk is gone
  ASSERT_NE(filesOf(origin()), written) << "the origin did not have everything yet";

  // The gang restarts on a new node before the origin has the files: its restore reads them from
  // the peer (the lost node, named first, is passed over).
  NodeProcess& elsewhere = startNode("n3");
  const fs::path restored = target("rank-0-again");
  auto withPeers = attributes;
  withPeers["checkpointPeers"] = "n1=" + writerAddress + ",n2=" + peer.address();
  ASSERT_TRUE(publish(elsewhere, checkpointRequest(restored, withPeers)).ok()) << elsewhere.log();
  EXPECT_EQ(filesOf(restored), written) << elsewhere.log();
  EXPECT_NE(elsewhere.log().find("peerFiles=" + std::to_string(written.size())), std::string::npos)
      << elsewhere.log();
  EXPECT_GE(seriesOf(elsewhere, "granary_peer_received_bytes_total", "peer=\"n2\""), 2 << 20)
      << "the restore crossed the data plane";

  // The operator says the writer's node is lost: its peer uploads its files, markers last.
  ASSERT_TRUE(setPeers(peer, uri(), {}, {"n1"}).ok()) << peer.log();
  ASSERT_TRUE(eventually(
      [&] {
        const auto atOrigin = filesOf(origin());
        if (atOrigin.contains("step-40/.metadata")) {  // never before the files it names
          for (const char* rank : {"step-40/__0_0.distcp", "step-40/__1_0.distcp"})
            EXPECT_EQ(atOrigin.contains(rank) ? atOrigin.at(rank) : "", written.at(rank));
        }
        return atOrigin == written;
      },
      60s, 50ms))
      << peer.log();
}

// Every file and directory below `dir` (symlinks as "-> target"), with each file's bytes.
Tree entriesOf(const fs::path& dir) {
  Tree out;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    const std::string relative = fs::relative(entry.path(), dir).string();
    if (entry.is_symlink())
      out[relative] = "-> " + fs::read_symlink(entry.path()).string();
    else if (entry.is_regular_file())
      out[relative] = readAll(entry.path());
    else
      out[relative + "/"] = "";
  }
  return out;
}

// A root of namespaces: a pod of namespace team-b naming team-a's directory, by name, by "..",
// or through a symlink in its own directory, is refused (PERMISSION_DENIED naming the root and
// the namespace) and nothing of team-a's is read, written or removed; a pod of team-a is served,
// as is a pod of team-b in its own directory (made by the node) and in a shared root.
TEST_F(CheckpointVolumeProcessTest, APodWritesOnlyItsNamespacesDirectoryOfARootOfNamespaces) {
  const fs::path teams = root_ / "teams", runA = teams / "team-a" / "run1";
  fs::create_directories(runA / "step-10");
  std::ofstream(runA / "step-10" / "model.pt", std::ios::binary) << randomBytes(1 << 20, 7);
  std::ofstream(runA / "latest") << 10;
  fs::create_directories(teams / "team-b");
  fs::create_directory_symlink(runA, teams / "team-b" / "escape");
  fs::create_directory_symlink(teams / "team-a", teams / "team-c");  // a whole directory
  const Tree before = entriesOf(teams / "team-a");
  NodeProcess& node = startNode(
      "n1", "", rootOfNamespaces(teams) + ", " + sharedRoot(root_ / "origins"));

  const auto fromB = [&](const std::string& uri, const std::string& ns = "team-b") {
    return publish(node, checkpointRequest(target("b-" + std::to_string(targets_.size())),
                                           {{"checkpoints", uri}}, "evil-worker-0", ns));
  };
  for (const auto& [uri, ns] :
       {std::pair{"file://" + runA.string() + "/", std::string("team-b")},
        std::pair{"file://" + (teams / "team-b" / ".." / "team-a" / "run1").string() + "/",
                  std::string("team-b")},
        std::pair{"file://" + (teams / "team-b" / "escape").string() + "/", std::string("team-b")},
        std::pair{"file://" + (teams / "team-c" / "run1").string() + "/", std::string("team-c")}}) {
    const grpc::Status status = fromB(uri, ns);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << uri;
    for (const std::string& said : std::vector<std::string>{uri + " is refused for namespace " + ns, (teams / "{namespace}").string(),
          (teams / ns).string() + "/", "cacheNode.checkpointOriginRoots"})
      EXPECT_NE(status.error_message().find(said), std::string::npos)
          << said << " in " << status.error_message();
  }
  for (const fs::path& refused : targets_)
    EXPECT_FALSE(fs::exists(refused / "latest")) << "nothing of team-a's was read into " << refused;
  EXPECT_EQ(entriesOf(teams / "team-a"), before) << "team-a's origin is as it was, byte for byte";

  // team-a's own pod restores its files and drains its writes.
  const fs::path mountA = target("a-0");
  ASSERT_TRUE(publish(node, checkpointRequest(mountA, {{"checkpoints", "file://" + runA.string()}},
                                              "llama-worker-0", "team-a"))
                  .ok())
      << node.log();
  EXPECT_EQ(readAll(mountA / "step-10" / "model.pt"), randomBytes(1 << 20, 7));
  std::ofstream(mountA / "step-10" / "optim.pt") << "team-a's optimizer";
  ASSERT_TRUE(eventually([&] { return fs::exists(runA / "step-10" / "optim.pt"); }, 30s))
      << node.log();

  // team-b in its own directory (which the node makes) and in the shared root is served.
  const fs::path mountB = target("b-own"), ownB = teams / "team-b" / "run2";
  ASSERT_TRUE(publish(node, checkpointRequest(mountB, {{"checkpoints", "file://" + ownB.string()}},
                                              "gpt-worker-0", "team-b"))
                  .ok())
      << node.log();
  std::ofstream(mountB / "model.pt") << "team-b's";
  ASSERT_TRUE(eventually([&] { return readAll(ownB / "model.pt") == "team-b's"; }, 30s))
      << node.log();
  EXPECT_TRUE(
      publish(node, checkpointRequest(target("b-shared"), {{"checkpoints", uri()}}, "t5-worker-0",
                                      "team-b"))
          .ok())
      << "a shared root serves every namespace";
}

TEST_F(CheckpointVolumeProcessTest, BadVolumesAreRefusedNamingTheAttribute) {
  NodeProcess& node = startNode("n1");
  const fs::path mount = target("rank-0");
  const auto refused = [&](std::map<std::string, std::string> attributes,
                           const std::map<std::string, std::string>& secrets,
                           const std::string& expected) {
    auto request = checkpointRequest(mount, std::move(attributes));
    request.mutable_secrets()->insert(secrets.begin(), secrets.end());
    const grpc::Status status = publish(node, request);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << expected;
    EXPECT_NE(status.error_message().find(expected), std::string::npos) << status.error_message();
    EXPECT_EQ(status.error_message().find("hunter2"), std::string::npos)
        << "credentials never appear in errors";
  };
  refused({{"checkpoints", "file:///etc/"}}, {}, "checkpointOriginRoots");
  // The datasets' roots are read-only: no job writes there.
  refused({{"checkpoints", "file://" + (root_ / "datasets" / "coco").string()}}, {},
          "outside the cache node's checkpointOriginRoots");
  refused({{"checkpoints", "https://example.com/runs/"}}, {}, "volumeAttributes.checkpoints");
  refused({{"checkpoints", uri()}, {"bandwidthLimit", "fast"}}, {},
          "volumeAttributes.bandwidthLimit");
  refused({{"checkpoints", uri()}, {"dataset", "coco"}}, {}, "volumeAttributes.dataset: unknown");
  refused({{"checkpoints", "s3://runs/bert/"}}, {{"accessKeyId", "AKIA"}},
          "needs both accessKeyId and secretAccessKey");
  refused({{"checkpoints", "s3://runs/bert/"}, {"endpoint", "not a url"}},
          {{"accessKeyId", "AKIA"}, {"secretAccessKey", "hunter2"}}, "endpoint");
  EXPECT_FALSE(fs::exists(mount / "latest"));
  EXPECT_EQ(node.log().find("hunter2"), std::string::npos) << "nor in the log";
}

}  // namespace
}  // namespace granary::testing

// The generated granary.v1 API: messages round-trip and the services serve over real gRPC.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "granary/v1/cache_node.grpc.pb.h"
#include "granary/v1/peer.grpc.pb.h"

namespace granary {
namespace {

v1::EnsureDatasetRequest sampleEnsure() {
  v1::EnsureDatasetRequest request;
  auto* ref = request.mutable_dataset();
  ref->set_namespace_("ml");
  ref->set_name("imagenet");
  ref->set_generation(3);
  auto* mount = request.add_mounts();
  mount->mutable_source()->set_uri("s3://datasets/imagenet/");
  mount->mutable_source()->set_region("us-east-1");
  mount->mutable_credentials()->set_access_key_id("AKIAEXAMPLE");
  request.mutable_cache()->set_replicas(2);
  request.mutable_cache()->set_policy(v1::EVICTION_POLICY_PIN);
  auto* node = request.add_node_set();
  node->set_node_name("gpu-1");
  node->set_address("10.0.0.1:7400");
  return request;
}

TEST(Proto, EnsureRequestRoundTrips) {
  const auto request = sampleEnsure();
  std::string wire;
  ASSERT_TRUE(request.SerializeToString(&wire));
  v1::EnsureDatasetRequest decoded;
  ASSERT_TRUE(decoded.ParseFromString(wire));
  EXPECT_EQ(decoded.dataset().name(), "imagenet");
  EXPECT_EQ(decoded.mounts(0).source().uri(), "s3://datasets/imagenet/");
  EXPECT_EQ(decoded.cache().replicas(), 2u);
  EXPECT_EQ(decoded.node_set(0).address(), "10.0.0.1:7400");
}

// A minimal CacheNode that answers status from the last ensured request.
class EchoCacheNode final : public v1::CacheNode::Service {
 public:
  grpc::Status EnsureDataset(grpc::ServerContext* context, const v1::EnsureDatasetRequest* request,
                             v1::EnsureDatasetResponse* response) override {
    const auto auth = context->client_metadata().find("authorization");
    if (auth == context->client_metadata().end() || auth->second != "Bearer t0ken") {
      return {grpc::StatusCode::UNAUTHENTICATED, "missing or wrong bearer token"};
    }
    *response->mutable_status()->mutable_dataset() = request->dataset();
    response->mutable_status()->set_phase(v1::DATASET_PHASE_LISTING);
    return grpc::Status::OK;
  }

  grpc::Status WatchProgress(grpc::ServerContext*, const v1::WatchProgressRequest* request,
                             grpc::ServerWriter<v1::DatasetStatus>* writer) override {
    for (int64_t cached = 0; cached <= 100; cached += 50) {
      v1::DatasetStatus status;
      *status.mutable_dataset() = request->dataset();
      status.mutable_progress()->set_cached_bytes(cached);
      writer->Write(status);
    }
    return grpc::Status::OK;
  }
};

TEST(Proto, CacheNodeServiceServesOverLoopback) {
  EchoCacheNode service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_GT(port, 0);

  auto channel =
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
  auto stub = v1::CacheNode::NewStub(channel);

  {
    grpc::ClientContext context;
    v1::EnsureDatasetResponse response;
    const auto status = stub->EnsureDataset(&context, sampleEnsure(), &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext context;
    context.AddMetadata("authorization", "Bearer t0ken");
    v1::EnsureDatasetResponse response;
    const auto status = stub->EnsureDataset(&context, sampleEnsure(), &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.status().dataset().name(), "imagenet");
    EXPECT_EQ(response.status().phase(), v1::DATASET_PHASE_LISTING);
  }
  {
    grpc::ClientContext context;
    v1::WatchProgressRequest request;
    request.mutable_dataset()->set_name("imagenet");
    auto reader = stub->WatchProgress(&context, request);
    std::vector<int64_t> seen;
    v1::DatasetStatus status;
    while (reader->Read(&status)) seen.push_back(status.progress().cached_bytes());
    EXPECT_TRUE(reader->Finish().ok());
    EXPECT_EQ(seen, (std::vector<int64_t>{0, 50, 100}));
  }
  server->Shutdown();
}

TEST(Proto, PeerChunkRoundTrips) {
  v1::ChunkData chunk;
  chunk.set_offset(4096);
  chunk.set_data(std::string(1024, 'x'));
  chunk.set_last(true);
  chunk.set_xxh3(0x1234abcdULL);
  v1::ChunkData decoded;
  ASSERT_TRUE(decoded.ParseFromString(chunk.SerializeAsString()));
  EXPECT_EQ(decoded.offset(), 4096);
  EXPECT_EQ(decoded.data().size(), 1024u);
  EXPECT_EQ(decoded.xxh3(), 0x1234abcdULL);
  EXPECT_STREQ(v1::Peer::service_full_name(), "granary.v1.Peer");
}

TEST(Proto, ServicesExposeTheDesignedMethods) {
  const auto* cacheNode = v1::CacheNode::service_full_name();
  EXPECT_STREQ(cacheNode, "granary.v1.CacheNode");
  const auto* descriptor =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName("granary.v1.CacheNode");
  ASSERT_NE(descriptor, nullptr);
  for (const char* method :
       {"EnsureDataset", "PurgeDataset", "GetDatasetStatus", "ListDatasets", "WatchProgress",
        "SetWarmPlan", "Stat", "ListDirectory", "Read", "GetTelemetry"}) {
    EXPECT_NE(descriptor->FindMethodByName(method), nullptr) << method;
  }
  const auto* peer =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName("granary.v1.Peer");
  ASSERT_NE(peer, nullptr);
  EXPECT_TRUE(peer->FindMethodByName("ReadChunk")->server_streaming());
  ASSERT_NE(peer->FindMethodByName("FollowListing"), nullptr);
  EXPECT_TRUE(peer->FindMethodByName("FollowListing")->server_streaming());
}

}  // namespace
}  // namespace granary

// The affinity policy's parts: prefix blocks, the per-target index, the
// parser of a replica's /metrics, and the order they give.
#include "route/replica_picker.h"

#include <gtest/gtest.h>

namespace hone::route {
namespace {

backend::GenerationRequest Chat(const std::string& system, const std::string& user) {
  backend::GenerationRequest r;
  r.model = "support";
  r.chat = true;
  r.messages = {{"system", system}, {"user", user}};
  return r;
}

const std::string kSystemA(2000, 'a'), kSystemB(2000, 'b');

TEST(PrefixBlocks, SharedSystemPromptsShareLeadingBlocksOnly) {
  const PromptBlocks a1 = PrefixBlocks(Chat(kSystemA, "where is my order?"));
  const PromptBlocks a2 = PrefixBlocks(Chat(kSystemA, "how do I return a lamp?"));
  const PromptBlocks b = PrefixBlocks(Chat(kSystemB, "where is my order?"));
  ASSERT_EQ(a1.hashes.size(), a1.bytes / kPrefixBlockBytes);
  ASSERT_GE(a1.hashes.size(), 7u);
  // The system prompt fills 7 whole blocks; the 8th holds the user's text too.
  for (size_t i = 0; i < 7; ++i) EXPECT_EQ(a1.hashes[i], a2.hashes[i]) << i;
  EXPECT_NE(a1.hashes[0], b.hashes[0]);
  PrefixIndex index;
  index.Record("r1:m", a1);
  EXPECT_EQ(index.Match("r1:m", a2), 7u);
  EXPECT_EQ(index.Match("r1:m", b), 0u);
  EXPECT_EQ(index.Match("r2:m", a2), 0u);
}

TEST(PrefixIndex, ForgetsTheLeastRecentlyUsedBlocksTailFirst) {
  PrefixIndex index(/*blocks_per_target=*/10);
  const PromptBlocks a = PrefixBlocks(Chat(kSystemA, "x")), b = PrefixBlocks(Chat(kSystemB, "x"));
  ASSERT_EQ(a.hashes.size(), 7u);  // 2023 bytes
  index.Record("t", a);
  EXPECT_EQ(index.Match("t", a), 7u);
  index.Record("t", b);  // 14 blocks for 10 places: a loses its last four, keeps its head
  EXPECT_EQ(index.Match("t", a), 3u);
  EXPECT_EQ(index.Match("t", b), 7u);
}

TEST(ReplicaMetrics, ReadsTheProtocolSeriesPerModel) {
  const std::string text =
      "# HELP hone_num_requests_waiting Requests waiting for a slot\n"
      "# TYPE hone_num_requests_waiting gauge\n"
      "hone_num_requests_waiting{model_name=\"qwen\"} 3\n"
      "hone_num_requests_waiting{model_name=\"other\"} 1\n"
      "hone_num_requests_running{model_name=\"qwen\"} 4\n"
      "hone_kv_cache_usage_perc{model_name=\"qwen\"} 0.25\n"
      "hone_slot_wait_seconds{model_name=\"qwen\"} 1.5\n"
      "hone_prefill_tokens_per_second{model_name=\"qwen\"} 812.5\n"
      "hone_cache_config_info{model_name=\"qwen\",block_size=\"1\",num_gpu_blocks=\"16384\",slots=\"4\"} 1\n"
      "hone_e2e_request_latency_seconds_bucket{model_name=\"qwen\",le=\"+Inf\"} 10\n"
      "hone_e2e_request_latency_seconds_sum{model_name=\"qwen\"} 20\n"
      "hone_e2e_request_latency_seconds_count{model_name=\"qwen\"} 10\n"
      "hone_request_queue_time_seconds_sum{model_name=\"qwen\"} 5\n"
      "vllm:num_requests_waiting{model_name=\"qwen\"} 99\n"
      "garbage line without a value\n";
  auto m = ParseReplicaMetrics(text).models;
  ASSERT_EQ(m.count("qwen"), 1u);
  const ReplicaModelLoad& q = m["qwen"];
  EXPECT_EQ(q.waiting, 3);
  EXPECT_EQ(q.running, 4);
  EXPECT_DOUBLE_EQ(q.kv_usage, 0.25);
  EXPECT_DOUBLE_EQ(q.slot_wait_s, 1.5);
  EXPECT_DOUBLE_EQ(q.prefill_tps, 812.5);
  EXPECT_EQ(q.slots, 4);
  EXPECT_EQ(q.e2e_count, 10);
  EXPECT_EQ(q.queue_sum_s, 5);
  EXPECT_EQ(m["other"].waiting, 1);
  EXPECT_FALSE(ParseReplicaMetrics(text).draining);
  EXPECT_TRUE(ParseReplicaMetrics(text + "hone_server_draining 1\n").draining);
}

TEST(ReplicaMetrics, GarbageValuesAreSkipped) {
  auto m = ParseReplicaMetrics(
               "hone_num_requests_waiting{model_name=\"m\"} NaN\n"
               "hone_slot_wait_seconds{model_name=\"m\"} -5\n"
               "hone_prefill_tokens_per_second{model_name=\"m\"} +Inf\n"
               "hone_num_requests_running{model_name=\"m\"} 2\n")
               .models;
  EXPECT_EQ(m["m"].waiting, 0);
  EXPECT_EQ(m["m"].slot_wait_s, 0);
  EXPECT_EQ(m["m"].prefill_tps, 0);
  EXPECT_EQ(m["m"].running, 2);
}

std::string Idle(int slots) {
  return "hone_num_requests_waiting{model_name=\"m\"} 0\nhone_num_requests_running{model_name=\"m\"} 0\n"
         "hone_prefill_tokens_per_second{model_name=\"m\"} 100\n"
         "hone_cache_config_info{model_name=\"m\",block_size=\"1\",num_gpu_blocks=\"4096\",slots=\"" +
         std::to_string(slots) + "\"} 1\n";
}

std::vector<ReplicaPicker::Candidate> Three() {
  std::vector<ReplicaPicker::Candidate> cs;
  for (std::string name : {"r1", "r2", "r3"})
    cs.push_back(ReplicaPicker::Candidate{.label = name + ":m", .upstream = name, .model = "m"});
  return cs;
}

TEST(ReplicaPicker, SendsAPrefixWhereItWasSentBefore) {
  ReplicaPicker p;
  for (const char* r : {"r1", "r2", "r3"}) p.Update(r, true, Idle(2));
  const PromptBlocks a = PrefixBlocks(Chat(kSystemA, "first")), b = PrefixBlocks(Chat(kSystemB, "first"));
  auto cs = Three();
  // Nothing cached anywhere: the rotation spreads new prefixes.
  EXPECT_EQ(p.Order(cs, a, 1).front(), 1u);
  EXPECT_EQ(p.Order(cs, b, 2).front(), 2u);
  p.Record("r2:m", a);
  p.Record("r3:m", b);
  // Whatever the rotation, each prefix goes back where it is cached.
  for (uint64_t rot = 0; rot < 3; ++rot) {
    EXPECT_EQ(p.Order(cs, PrefixBlocks(Chat(kSystemA, "second")), rot).front(), 1u) << rot;
    EXPECT_EQ(p.Order(cs, PrefixBlocks(Chat(kSystemB, "second")), rot).front(), 2u) << rot;
  }
  // A cached prefix saves its prefill: 7 blocks of 256 bytes at 100 tok/s.
  const double cold = p.Predict(cs[0], PrefixBlocks(Chat(kSystemA, "x"))).ttft_s;
  const double warm = p.Predict(cs[1], PrefixBlocks(Chat(kSystemA, "x"))).ttft_s;
  EXPECT_NEAR(cold - warm, 7 * 256 / 4.0 / 100, 0.01);
}

TEST(ReplicaPicker, LoadOutweighsAffinityAndUnreachableReplicasGoLast) {
  ReplicaPicker p;
  EXPECT_FALSE(p.Update("r1", true, Idle(1)));  // first read, reachable: nothing to say
  EXPECT_FALSE(p.Update("r1", true, Idle(1)));
  p.Update("r2", true, Idle(1));
  EXPECT_TRUE(p.Update("r3", false, "metrics: HTTP 503"));  // first read failed: said once
  EXPECT_FALSE(p.Update("r3", false, "metrics: HTTP 503"));
  auto cs = Three();
  const PromptBlocks a = PrefixBlocks(Chat(kSystemA, "q"));
  p.Record("r1:m", a);
  EXPECT_EQ(p.Order(cs, a, 0).front(), 0u);
  // r1 holds the prefix but has 30 requests of this router ahead of a new one
  // (1 s each, one slot): r2 prefills the prompt sooner.
  cs[0].in_flight = 30;
  auto order = p.Order(cs, a, 0);
  EXPECT_EQ(order[0], 1u);
  EXPECT_EQ(order[1], 0u);
  EXPECT_EQ(order[2], 2u);  // unreachable: still a last resort
  // Its own forecast counts as well: a replica that says it is busy is busy.
  cs[0].in_flight = 0;
  p.Update("r1", true, Idle(1) + "hone_slot_wait_seconds{model_name=\"m\"} 60\n");
  EXPECT_EQ(p.Order(cs, a, 0).front(), 1u);
  // An open breaker is last whatever the estimate.
  p.Update("r1", true, Idle(1));
  cs[0].excluded = true;
  EXPECT_EQ(p.Order(cs, a, 0).back(), 0u);
  EXPECT_FALSE(p.Reachable("r3"));
  EXPECT_TRUE(p.Reachable("r1"));
  EXPECT_EQ(p.Json()["r3"]["error"], "metrics: HTTP 503");
  // A draining replica's metrics still answer, and say so: it goes last.
  cs[0].excluded = false;
  p.Update("r1", true, Idle(1) + "hone_server_draining 1\n");
  EXPECT_FALSE(p.Reachable("r1"));
  EXPECT_EQ(p.Order(cs, a, 0).front(), 1u);
}

TEST(ReplicaPicker, AReplicaWithoutTheModelCountsItsLoadTime) {
  ReplicaPicker p;
  p.Update("r1", true, "hone_model_load_duration_seconds_sum{model_name=\"m\"} 30\n"
                       "hone_model_load_duration_seconds_count{model_name=\"m\"} 2\n");
  p.Update("r2", true, Idle(1));
  p.Update("r3", true, "");  // serves other models only
  auto cs = Three();
  const PromptBlocks a = PrefixBlocks(Chat(kSystemA, "q"));
  const double prefill = a.bytes / 4.0 / 100;  // neither measured one: r2's rate stands in
  EXPECT_NEAR(p.Predict(cs[0], a).ttft_s, 15 + prefill, 1e-9);  // its own mean load time
  EXPECT_NEAR(p.Predict(cs[2], a).ttft_s, 5 + prefill, 1e-9);   // never loaded there: 5 s
  EXPECT_EQ(p.Order(cs, a, 0).front(), 1u);  // r2 has it loaded
}

TEST(ReplicaPicker, AReplicaThatHasNotMeasuredYetIsAsFastAsItsMeasuredPeers) {
  ReplicaPicker p;
  // r1 served one request and measured 20,000 tok/s; r2 and r3 just started.
  p.Update("r1", true, "hone_num_requests_running{model_name=\"m\"} 0\n"
                       "hone_prefill_tokens_per_second{model_name=\"m\"} 20000\n"
                       "hone_cache_config_info{model_name=\"m\",block_size=\"1\",num_gpu_blocks=\"4096\",slots=\"2\"} 1\n");
  for (const char* r : {"r2", "r3"}) {
    p.Update(r, true, "hone_num_requests_running{model_name=\"m\"} 0\n"
                      "hone_cache_config_info{model_name=\"m\",block_size=\"1\",num_gpu_blocks=\"4096\",slots=\"2\"} 1\n");
  }
  auto cs = Three();
  const PromptBlocks b = PrefixBlocks(Chat(kSystemB, "q"));
  EXPECT_NEAR(p.Predict(cs[1], b).ttft_s, p.Predict(cs[0], b).ttft_s, 1e-9);
  // So a new prefix follows the rotation instead of going to r1 every time.
  EXPECT_EQ(p.Order(cs, b, 1).front(), 1u);
  EXPECT_EQ(p.Order(cs, b, 2).front(), 2u);
}

TEST(ReplicaPicker, PrefillsInFlightThereCountUntilTheirFirstToken) {
  ReplicaPicker p;
  for (const char* r : {"r1", "r2", "r3"}) p.Update(r, true, Idle(4));  // 4 free slots, 100 tok/s
  auto cs = Three();
  const PromptBlocks a = PrefixBlocks(Chat(kSystemA, "q")), b = PrefixBlocks(Chat(kSystemB, "q"));
  p.Record("r1:m", a);
  EXPECT_EQ(p.Order(cs, a, 0).front(), 0u);  // cached at r1, and r1 is idle
  // Three cold prompts went to r1 and have no first token yet: its slots are
  // free, but they share one thread, so a's short unseen tail waits behind them.
  std::vector<std::unique_ptr<ReplicaPicker::Pending>> held;
  for (int i = 0; i < 3; ++i) held.push_back(p.AddPending("r1:m", b));
  EXPECT_NEAR(p.PendingTokens("r1:m"), 3 * (b.bytes / 4.0), 1e-9);
  EXPECT_NEAR(p.Predict(cs[0], a).ttft_s - p.Predict(cs[1], a).ttft_s,
              3 * (b.bytes / 4.0) / 100 - 7 * 256 / 4.0 / 100, 0.01);
  EXPECT_NE(p.Order(cs, a, 0).front(), 0u);
  // Their first tokens came (or they ended): r1 is the place for a again.
  held[0]->Release();
  held[0]->Release();  // once only
  held.clear();
  EXPECT_EQ(p.PendingTokens("r1:m"), 0);
  EXPECT_EQ(p.Order(cs, a, 0).front(), 0u);
  // Only what a target has not seen is pending there.
  auto tail = p.AddPending("r1:m", a);
  EXPECT_NEAR(p.PendingTokens("r1:m"), (a.bytes - 7 * 256) / 4.0, 1e-9);
}

}  // namespace
}  // namespace hone::route

// The CSV reader and `plan validate`'s row handling: metric conventions,
// inferred and chosen settings, errors naming row and column.
#include <gtest/gtest.h>

#include <cmath>

#include "core/strings.h"
#include "plan/calibration_fit.h"
#include "plan/memory_model.h"
#include "plan/presets.h"
#include "plan/published_row.h"
#include "plan/stack_profile.h"
#include "plan/validate.h"

namespace tera {
namespace {

TEST(Csv, QuotesCommasAndNewlines) {
  auto t = parse_csv("a,b,c\n1,\"x, y\",\"say \"\"hi\"\"\"\n2,\"multi\nline\",\n\n", "t.csv");
  ASSERT_TRUE(t.ok()) << t.error();
  ASSERT_EQ(t->rows.size(), 2u);
  EXPECT_EQ(t->rows[0].at("b"), "x, y");
  EXPECT_EQ(t->rows[0].at("c"), "say \"hi\"");
  EXPECT_EQ(t->rows[1].at("b"), "multi\nline");
  EXPECT_EQ(t->rows[1].at("c"), "");
  EXPECT_EQ(t->row_lines[1], 3);
  auto bad = parse_csv("a,b\n1,2,3\n", "bad.csv");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("bad.csv:2"), std::string::npos);
  EXPECT_FALSE(parse_csv("a\n\"open\n", "q.csv").ok());
}

const char* kHeader =
    "row_id,model,layers,hidden,heads,kv_heads,ffn_hidden,mlp,seq_len,vocab,precision,gpu_type,"
    "gpu_peak_tflops_used_by_source,num_gpus,tp,pp,dp,cp,sequence_parallel,vpp_chunks,zero_fsdp_distopt,"
    "micro_batch,global_batch_seqs,activation_recompute,reported_tflops_per_gpu,reported_util_pct,util_metric,"
    "iteration_time_s\n";

TEST(Validate, MetricConventionsAndFlags) {
  // Row 1: a complete row reporting MFU. Row 2: the same run reported in
  // Megatron's hardware-FLOP convention with recompute left empty (inferred
  // full). Row 3: iteration time with micro-batch and recompute left to the planner.
  const std::string csv = std::string(kHeader) +
      "1,GPT 22B,48,6144,64,64,24576,standard,2048,51200,mixed,A100-SXM4-80GB,312,8,8,1,1,1,yes,,none,4,4,"
      "selective,,41.5,MFU,\n"
      "2,GPT 22B,48,6144,64,64,24576,standard,2048,51200,mixed,A100-SXM4-80GB,312,8,8,1,1,1,no,,none,4,4,"
      ",130,,% of peak (hardware FLOPs incl. recompute),\n"
      "3,GPT 22B,48,6144,64,64,24576,standard,2048,51200,mixed,A100-SXM4-80GB,312,8,8,1,1,1,yes,,none,,4,"
      ",,,,1.1\n"
      "4,GPT 22B,48,6144,64,64,24576,standard,2048,51200,mixed,A100-SXM4-80GB,312,8,8,1,1,1,no,,none,4,4,"
      "full,,,,1.42\n";
  auto table = parse_csv(csv, "runs.csv");
  ASSERT_TRUE(table.ok());
  auto rep = validate_runs(*table, "runs.csv", &load_cluster);
  ASSERT_TRUE(rep.ok()) << rep.error();
  ASSERT_EQ(rep->rows.size(), 4u);
  const RowPrediction& a = rep->rows[0];
  EXPECT_EQ(a.metric, MetricKind::util_pct);
  EXPECT_EQ(a.convention, FlopConvention::model);
  EXPECT_EQ(a.cluster, "selene");
  EXPECT_TRUE(a.flags.empty());
  EXPECT_EQ(a.layout.recompute, Recompute::selective);
  EXPECT_NEAR(a.rel_error, (a.predicted - 41.5) / 41.5, 1e-12);
  const RowPrediction& b = rep->rows[1];
  EXPECT_EQ(b.convention, FlopConvention::megatron_eq3);
  EXPECT_EQ(b.layout.recompute, Recompute::full);
  EXPECT_NE(std::find(b.flags.begin(), b.flags.end(), "recompute=full inferred from the FLOP convention"), b.flags.end());
  const RowPrediction& c = rep->rows[2];
  EXPECT_EQ(c.metric, MetricKind::iteration_time_s);
  EXPECT_NE(std::find(c.flags.begin(), c.flags.end(), "micro_batch chosen"), c.flags.end());
  EXPECT_EQ(4 % (c.layout.micro_batch * c.layout.dp), 0);
  // Rows 2 and 4 are the same run: row 2's hardware TFLOP/s is Megatron's
  // eq. 3 FLOPs, 96 B s l h^2 (1 + s/6h + V/16lh), over row 4's step time.
  const RowPrediction& d = rep->rows[3];
  const double B = 4, s = 2048, l = 48, h = 6144, V = 51200;
  const double eq3 = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  EXPECT_NEAR(b.predicted, eq3 / d.predicted / 8 / 1e12, 1e-9 * b.predicted);
  // Median and max of |error|.
  std::vector<double> e;
  for (const auto& r : rep->rows) e.push_back(std::fabs(r.rel_error));
  std::sort(e.begin(), e.end());
  EXPECT_DOUBLE_EQ(rep->median_abs_error, 0.5 * (e[1] + e[2]));
  EXPECT_DOUBLE_EQ(rep->max_abs_error, e[3]);
}

TEST(Validate, BadRowsNameRowAndColumn) {
  const std::string bad_row = "7,X,48,abc,64,,,,2048,51200,mixed,A100,312,8,8,1,1,,,,,4,4,full,100,,,\n";
  const std::string good_row = "9,X,4,64,4,,,,64,100,mixed,H100,,8,1,1,4,2,,,,1,8,full,100,,,\n";
  auto t1 = parse_csv(std::string(kHeader) + bad_row + good_row, "r.csv");
  auto r1 = validate_runs(*t1, "r.csv", &load_cluster);
  ASSERT_TRUE(r1.ok()) << r1.error();  // an unreadable row is skipped, never the run
  ASSERT_EQ(r1->skipped.size(), 1u);
  EXPECT_NE(r1->skipped[0].find("row_id 7"), std::string::npos);
  EXPECT_NE(r1->skipped[0].find("hidden"), std::string::npos);
  // Nothing scored is a failure, never "0 rows: median 0.00%" (issue 35 row 17).
  auto t0 = parse_csv(std::string(kHeader) + bad_row, "r.csv");
  auto r0 = validate_runs(*t0, "r.csv", &load_cluster);
  ASSERT_FALSE(r0.ok());
  EXPECT_NE(r0.error().find("no row could be scored"), std::string::npos) << r0.error();
  // Rows the planner cannot price are listed as skipped, not counted.
  auto t2 = parse_csv(std::string(kHeader) + "8,X,4,64,4,,,,64,100,mixed,TPU v4,,8,1,1,8,,,,,1,8,full,100,,,\n" +
                          "9,X,4,64,4,,,,64,100,mixed,H100,,8,1,1,4,2,,,,1,8,full,100,,,\n",
                      "r.csv");
  auto r2 = validate_runs(*t2, "r.csv", &load_cluster);
  ASSERT_TRUE(r2.ok()) << r2.error();
  ASSERT_EQ(r2->skipped.size(), 1u);
  EXPECT_NE(r2->skipped[0].find("gpu_type 'TPU v4'"), std::string::npos);
  // Context parallelism is priced: 8 GPUs = dp 4 x cp 2.
  ASSERT_EQ(r2->rows.size(), 1u);
  EXPECT_EQ(r2->rows[0].layout.cp, 2);
  EXPECT_EQ(r2->rows[0].layout.dp, 4);
  // fp8 on a GPU without an fp8 peak (A100) is skipped with that reason.
  auto t6 = parse_csv(std::string(kHeader) + "12,X,4,64,4,,,,64,100,fp8,A100,,8,1,1,8,,,,,1,8,full,100,,,\n" + good_row, "r.csv");
  auto r6 = validate_runs(*t6, "r.csv", &load_cluster);
  ASSERT_TRUE(r6.ok()) << r6.error();
  ASSERT_EQ(r6->skipped.size(), 1u);
  EXPECT_NE(r6->skipped[0].find("no fp8 peak"), std::string::npos);
  // "6 or 12" where a number belongs: that row is skipped naming the column, the next one is priced.
  auto t7 = parse_csv(std::string(kHeader) + "13,X,4,64,4,,,,64,100,mixed,A100,,8,1,1,8,,,,,6 or 12,8,full,100,,,\n" +
                          "14,X,4,64,4,,,,64,100,mixed,A100,,8,1,1,8,,,,,1,8,full,100,,,\n",
                      "r.csv");
  auto r7 = validate_runs(*t7, "r.csv", &load_cluster);
  ASSERT_TRUE(r7.ok()) << r7.error();
  ASSERT_EQ(r7->skipped.size(), 1u);
  EXPECT_NE(r7->skipped[0].find("row_id 13"), std::string::npos);
  EXPECT_NE(r7->skipped[0].find("micro_batch"), std::string::npos);
  EXPECT_EQ(r7->rows.size(), 1u);
  // A layout that contradicts the row's own model (tp 3 does not divide 4 heads) is skipped too.
  auto t5 = parse_csv(std::string(kHeader) + "11,X,4,64,4,,,,64,100,mixed,A100,,3,3,1,1,,,,,1,8,full,100,,,\n" + good_row, "r.csv");
  auto r5 = validate_runs(*t5, "r.csv", &load_cluster);
  ASSERT_TRUE(r5.ok()) << r5.error();
  ASSERT_EQ(r5->skipped.size(), 1u);
  EXPECT_NE(r5->skipped[0].find("parallel.tp = 3 does not divide model.heads = 4"), std::string::npos);
  auto t4 = parse_csv(std::string(kHeader) + "10,X,4,64,4,,,,64,100,mixed,A100,,8,1,1,8,,,,,1,,full,100,,,\n" + good_row, "r.csv");
  auto r4 = validate_runs(*t4, "r.csv", &load_cluster);
  ASSERT_TRUE(r4.ok()) << r4.error();
  ASSERT_EQ(r4->skipped.size(), 1u);
  EXPECT_NE(r4->skipped[0].find("global_batch_seqs"), std::string::npos);
  auto t3 = parse_csv("row_id,layers\n1,2\n", "s.csv");
  auto r3 = validate_runs(*t3, "s.csv", &load_cluster);
  ASSERT_FALSE(r3.ok());
  EXPECT_NE(r3.error().find("missing column 'hidden'"), std::string::npos);
}

// Issue 40: what a row says about its software is read, never assumed:
// the fp8 scaling recipe, FSDP's resharding, the FLOP convention of the
// TFLOP/s column, and the stack's own defaults where the row is silent.
// The columns of the in-memory run tables below (a subset of the calibration files').
const std::string kRowsHeader =
    "row_id,model,layers,hidden,heads,kv_heads,ffn_hidden,mlp,seq_len,vocab,precision,gpu_type,num_gpus,tp,pp,dp,"
    "sequence_parallel,vpp_chunks,zero_fsdp_distopt,micro_batch,global_batch_seqs,activation_recompute,"
    "reported_tflops_per_gpu,util_metric,iteration_time_s,framework,notes\n";

// The rows of a runs.csv text, priced as `tera plan validate` prices them.
Expected<ValidationReport> validate_text(const std::string& csv) {
  auto table = parse_csv(csv, "runs.csv");
  if (!table.ok()) return table.status();
  return validate_runs(*table, "runs.csv", &load_cluster);
}

// Whether one of the row's flags contains `flag`.
bool has(const RowPrediction& p, const std::string& flag) {
  for (const std::string& f : p.flags) {
    if (f.find(flag) != std::string::npos) return true;
  }
  return false;
}

TEST(Validate, RowsSayTheirRecipeReshardingConventionAndStackDefaults) {
  const std::string llama = "Llama,16,2048,16,8,5632,gated,4096,32000,";
  const std::string csv = kRowsHeader +
      // 1: rowwise float8 named in the notes; 2: tensorwise.
      "1," + llama + "fp8,H100 SXM,8,1,1,8,no,,FSDP2 full shard over 8 ranks,2,16,selective,,,1.0,"
      "torchtitan; torch.compile ON,Quantization 'float8 rowwise'\n"
      "2," + llama + "fp8,H100 SXM,8,1,1,8,no,,FSDP2 full shard over 8 ranks,2,16,selective,,,1.0,"
      "torchtitan; torch.compile ON,Quantization 'float8 tensorwise'\n"
      // 3: pipelined FSDP without resharding, micro-batch and vpp left to the stack's defaults.
      "3," + llama + "bf16,H100 SXM,32,1,4,8,no,,FSDP2 full shard over 8 ranks; reshard_after_forward=False (PP "
      "default),,64,full,,,5.0,torchtitan; torch.compile ON; PP schedule Interleaved 1F1B,\n"
      // 4: the same with the plain 1F1B schedule named.
      "4," + llama + "bf16,H100 SXM,32,1,4,8,no,,FSDP2 full shard over 8 ranks; reshard_after_forward=False (PP "
      "default),,64,full,,,5.0,torchtitan; torch.compile ON; PP schedule 1F1B,\n"
      // 5: MFU in the utilisation column, hardware FLOPs in the TFLOP/s one; a
      // DeepSpeed + Megatron run that names no sequence parallelism.
      "5,GPT,24,4096,32,32,16384,standard,2048,51200,bf16,A100-SXM4-80GB,64,8,2,4,,,ZeRO-1,1,64,,120,"
      "MFU per the paper; TFLOP/s are Megatron-style hardware FLOPs,,DeepSpeed + Megatron-LM (3D parallelism),\n";
  auto table = parse_csv(csv, "runs.csv");
  ASSERT_TRUE(table.ok()) << table.error();
  auto rep = validate_runs(*table, "runs.csv", &load_cluster);
  ASSERT_TRUE(rep.ok()) << rep.error();
  ASSERT_EQ(rep->rows.size(), 5u) << (rep->skipped.empty() ? "" : rep->skipped[0]);
  EXPECT_TRUE(has(rep->rows[0], "fp8 rowwise scales"));
  EXPECT_FALSE(has(rep->rows[1], "fp8 rowwise"));
  // Same layout, same run otherwise: the rowwise kernel is never faster.
  EXPECT_GE(rep->rows[0].predicted, rep->rows[1].predicted);
  const RowPrediction& interleaved = rep->rows[2];
  EXPECT_FALSE(interleaved.layout.reshard_after_forward);
  EXPECT_TRUE(has(interleaved, "reshard_after_forward off"));
  EXPECT_EQ(interleaved.layout.vpp, 2);                  // torchtitan's Interleaved1F1B: two stages per rank
  EXPECT_EQ(interleaved.layout.micro_batch, 64 / 8 / 4);  // n_microbatches = pp
  EXPECT_TRUE(has(interleaved, "micro-batches = pp"));
  EXPECT_EQ(rep->rows[3].layout.vpp, 1);
  EXPECT_EQ(rep->rows[3].layout.schedule, ScheduleKind::one_f_one_b);
  const RowPrediction& ds = rep->rows[4];
  EXPECT_EQ(ds.metric, MetricKind::tflops_per_gpu);
  EXPECT_EQ(ds.convention, FlopConvention::megatron_eq3);
  EXPECT_EQ(ds.layout.recompute, Recompute::full);  // inferred from the convention
  EXPECT_FALSE(ds.layout.sequence_parallel);
  EXPECT_TRUE(has(ds, "no sequence parallelism"));
}

TEST(Validate, RowsSayTheirHybridSharding) {
  // A stated replica count (torchtitan's dp_replicate) fixes each group's
  // ranks; HSDP alone is one node's worth of them; more replicas than the
  // layout can have skips the row with the reason.
  const std::string llama = "Llama,16,2048,16,8,5632,gated,4096,32000,bf16,H100 SXM,64,1,1,64,no,,";
  const std::string tail = ",1,64,full,,,5.0,torchtitan,\n";
  const std::string csv = kRowsHeader + "1," + llama + "HSDP (dp_replicate 4; dp_shard 16)" + tail + "2," + llama + "HSDP" +
                          tail + "3," + llama + "FSDP2 full shard" + tail + "4," + llama + "HSDP; dp_replicate=128" + tail;
  auto table = parse_csv(csv, "runs.csv");
  ASSERT_TRUE(table.ok()) << table.error();
  auto rep = validate_runs(*table, "runs.csv", &load_cluster);
  ASSERT_TRUE(rep.ok()) << rep.error();
  ASSERT_EQ(rep->rows.size(), 3u);
  EXPECT_EQ(rep->rows[0].layout.shard, 16);  // 64 / 4 replicas
  EXPECT_EQ(rep->rows[1].layout.shard, 8);   // one DGX node (tp 1)
  EXPECT_FALSE(rep->rows[2].layout.hybrid_shard());
  // Same run otherwise: the hybrid layouts' gathers stay in smaller groups.
  EXPECT_NE(rep->rows[0].predicted, rep->rows[2].predicted);
  ASSERT_EQ(rep->skipped.size(), 1u);
  EXPECT_NE(rep->skipped[0].find("hybrid sharding does not fit"), std::string::npos) << rep->skipped[0];
}

TEST(Validate, PipelinedFsdpGathersOnceAStepUnlessTheRowSaysItReshards) {
  // FSDP with a pipeline and nothing said: a stage keeps its gathered
  // parameters for the step (PyTorch's pipeline schedules, Llama 3). Said
  // "reshard_after_forward=True": gathered again for every micro-batch.
  // Without a pipeline: FSDP's default, resharded.
  const std::string llama = "Llama,16,2048,16,8,5632,gated,4096,32000,bf16,H100 SXM,32,1,";
  const std::string tail = ",2,64,full,,,5.0,Meta internal,\n";
  const std::string csv = kRowsHeader + "1," + llama + "4,8,no,1,FSDP" + tail + "2," + llama +
                          "4,8,no,1,FSDP; reshard_after_forward=True" + tail + "3," + llama + "1,32,no,1,FSDP" + tail +
                          "4," + llama + "4,8,no,1,FSDP; reshard_after_forward only set for the last block" + tail +
                          "5," + llama + "1,32,no,1,FSDP; fsdp_reshard_after_forward = never" + tail;
  auto rep = validate_text(csv);
  ASSERT_TRUE(rep.ok()) << rep.error();
  ASSERT_EQ(rep->rows.size(), 5u);
  const RowPrediction &kept = rep->rows[0], &resharded = rep->rows[1], &flat = rep->rows[2];
  // "only" is not "on": unsaid, so the pipelined default; torchtitan's "never" is off.
  EXPECT_FALSE(rep->rows[3].layout.reshard_after_forward);
  EXPECT_TRUE(has(rep->rows[3], "FSDP with a pipeline"));
  EXPECT_FALSE(rep->rows[4].layout.reshard_after_forward);
  EXPECT_TRUE(has(rep->rows[4], "reshard_after_forward off"));
  EXPECT_EQ(kept.layout.zero, 3);
  EXPECT_FALSE(kept.layout.reshard_after_forward);
  EXPECT_TRUE(has(kept, "reshard_after_forward off (FSDP with a pipeline: parameters gathered once a step)"));
  EXPECT_TRUE(resharded.layout.reshard_after_forward);
  EXPECT_FALSE(has(resharded, "reshard_after_forward off"));
  EXPECT_TRUE(flat.layout.reshard_after_forward);
  // The same run: gathering once a step beats gathering for each of the 8 micro-batches.
  EXPECT_LT(kept.predicted, resharded.predicted);  // iteration time
}

TEST(Validate, ReportedPeakMemoryChecksTheMemoryModel) {
  // reported_peak_memory_gib is compared with the memory model's figure for
  // the layout priced; a value that is not a positive number skips the row
  // naming the column; a row without one is priced as before.
  const std::string header = kRowsHeader.substr(0, kRowsHeader.size() - 1) + ",reported_peak_memory_gib\n";
  const std::string gpt = "GPT,24,2048,16,16,8192,standard,2048,51200,bf16,H100 SXM,8,1,1,8,no,,ZeRO-1,";
  const std::string csv = header + "1," + gpt + "1,32,none,,,1.0,Megatron-Core,,20\n" + "2," + gpt +
                          "4,32,none,,,1.0,Megatron-Core,,30\n" + "3," + gpt + "4,32,none,,,1.0,Megatron-Core,,\n" +
                          "4," + gpt + "4,32,none,,,1.0,Megatron-Core,,lots\n";
  auto rep = validate_text(csv);
  ASSERT_TRUE(rep.ok()) << rep.error();
  ASSERT_EQ(rep->rows.size(), 3u) << (rep->skipped.empty() ? "" : rep->skipped[0]);
  const RowPrediction &small = rep->rows[0], &large = rep->rows[1], &silent = rep->rows[2];
  EXPECT_DOUBLE_EQ(small.reported_memory_gib, 20);
  EXPECT_GT(small.predicted_memory_gib, 0);
  EXPECT_GT(large.predicted_memory_gib, small.predicted_memory_gib);  // four sequences' activations, not one
  EXPECT_DOUBLE_EQ(silent.reported_memory_gib, 0);
  EXPECT_DOUBLE_EQ(silent.predicted_memory_gib, large.predicted_memory_gib);
  ASSERT_EQ(rep->memory.rows, 2);
  const double e1 = small.predicted_memory_gib / 20 - 1, e2 = large.predicted_memory_gib / 30 - 1;
  EXPECT_DOUBLE_EQ(rep->memory.median_abs_error, 0.5 * (std::fabs(e1) + std::fabs(e2)));
  EXPECT_DOUBLE_EQ(rep->memory.max_abs_error, std::max(std::fabs(e1), std::fabs(e2)));
  ASSERT_EQ(rep->skipped.size(), 1u);
  EXPECT_NE(rep->skipped[0].find("reported_peak_memory_gib"), std::string::npos) << rep->skipped[0];
}

TEST(Validate, AGatedRowIsLlamasArchitecture) {
  // A gated MLP is Llama's block: rotary positions, so no learned position
  // table of seq_len x hidden (4.3B parameters for a 16k-wide model at a
  // 262k context), RMSNorm without biases, untied embeddings. A standard
  // MLP keeps GPT's learned positions.
  const std::string tail = ",bf16,H100 SXM,8,1,1,8,no,,ZeRO-1,1,8,none,,,1.0,Megatron-Core,\n";
  const std::string csv = kRowsHeader + "1,Llama,4,1024,8,8,2816,gated,4096,32000" + tail +
                          "2,GPT,4,1024,8,8,4096,standard,4096,32000" + tail;
  auto table = parse_csv(csv, "runs.csv");
  ASSERT_TRUE(table.ok()) << table.error();
  auto parsed = parse_runs({*table}, {"runs.csv"}, &load_cluster);
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  ASSERT_EQ(parsed->cases.size(), 2u);
  const ModelConfig &llama = parsed->cases[0].w.model, &gpt = parsed->cases[1].w.model;
  EXPECT_EQ(llama.arch, Arch::llama);
  EXPECT_TRUE(parsed->cases[0].w.untied_embeddings);
  EXPECT_EQ(gpt.arch, Arch::gpt2);
  EXPECT_EQ(param_split(ModelSpec(llama), 1).wpe, 0);
  EXPECT_EQ(param_split(ModelSpec(gpt), 1).wpe, 4096.0 * 1024);
}

TEST(Validate, HardwareNamesAPresetOrTheReasonItHasNone) {
  // Names in any case; PCIe and NVL boards (lower power and clock) are
  // skipped with the reason, not priced as the SXM part; GH200 is priced as
  // an H200, flagged.
  const std::string gpt = "GPT,24,2048,16,16,8192,standard,2048,51200,bf16,";
  const std::string tail = ",8,1,1,8,no,,,4,32,none,,,2.0,NeMo 24.07,\n";
  const std::string csv = kRowsHeader + "1," + gpt + "h100 sxm5 80gb (NVLink)" + tail + "2," + gpt + "H100 PCIe 80GB" + tail +
                          "3," + gpt + "H100 NVL" + tail + "4," + gpt + "GH200 96GB" + tail + "5," + gpt +
                          "H100 SXM lower-TDP HBM2e variant (between SXM and NVL)" + tail + "6," + gpt + "B200" + tail;
  auto rep = validate_text(csv);
  ASSERT_TRUE(rep.ok()) << rep.error();
  ASSERT_EQ(rep->rows.size(), 3u);
  EXPECT_EQ(rep->rows[0].cluster, "dgx-h100");
  EXPECT_EQ(rep->rows[0].profile, "megatron-core");  // NeMo runs on Megatron-Core
  EXPECT_EQ(rep->rows[1].cluster, "dgx-h200");       // GH200: H200's peak and HBM3e, flagged
  EXPECT_TRUE(has(rep->rows[1], "GH200 priced as an H200 in a DGX node (same tensor peak; its node's links differ)"));
  EXPECT_GT(rep->rows[1].predicted_memory_gib, 0);
  EXPECT_EQ(rep->rows[2].cluster, "h100-hbm2e");
  ASSERT_EQ(rep->skipped.size(), 3u);
  EXPECT_NE(rep->skipped[0].find("row_id 2 (runs.csv): gpu_type 'H100 PCIe 80GB' has no cluster preset: a PCIe or NVL board"),
            std::string::npos)
      << rep->skipped[0];
  EXPECT_NE(rep->skipped[1].find("PCIe or NVL"), std::string::npos) << rep->skipped[1];
  EXPECT_NE(rep->skipped[2].find("no preset for this GPU"), std::string::npos) << rep->skipped[2];
  // The words are matched as words: NVLink is not NVL, Nemotron is not NeMo.
  EXPECT_TRUE(contains_word_ignore_case("H100 NVL", "nvl"));
  EXPECT_FALSE(contains_word_ignore_case("A100 80GB NVLink", "NVL"));
  EXPECT_TRUE(contains_word_ignore_case("GB200 NVL72", "NVL", true));
  EXPECT_FALSE(contains_word_ignore_case("GB200 NVL72", "NVL"));
  EXPECT_EQ(profile_for_framework("NVIDIA NeMo 2.0").name, "megatron-core");
  EXPECT_EQ(profile_for_framework("Megatron-LM 2021 (Nemotron data)").name, "megatron-lm");
}

TEST(CrossValidation, ALoneProfileTakesItsFamilysFit) {
  // Source A: two DeepSpeed ZeRO-3 runs, slower than the preset alone says.
  // Source B: the only DeepSpeed + Megatron-LM run; source C: the only llm.c
  // run. Held out, B is priced with one fit over its family's rows (A's, as
  // `--fit` on A alone gives them), not with neutral parameters; C, whose
  // family has no other row, keeps neutral ones.
  const std::string header = "row_id,source," + kRowsHeader.substr(kRowsHeader.find(',') + 1);
  const std::string gpt = "GPT,24,2048,16,16,8192,standard,2048,51200,bf16,A100-SXM4-80GB,";
  const std::string a = "1,A," + gpt + "8,1,1,8,no,,ZeRO-3 (DeepSpeed),4,32,none,,,3.0,DeepSpeed,\n" +
                        "2,A," + gpt + "8,1,1,8,no,,ZeRO-3 (DeepSpeed),4,64,none,,,5.5,DeepSpeed,\n";
  const std::string b = "3,B," + gpt + "16,2,2,4,no,,ZeRO-1,1,64,full,,,9.0,DeepSpeed + Megatron-LM,\n";
  const std::string c = "4,C," + gpt + "8,1,1,8,no,,,4,32,none,,,2.0,llm.c,\n";
  auto all = parse_csv(header + a + b + c, "runs.csv");
  auto only_a = parse_csv(header + a, "a.csv");
  auto only_b = parse_csv(header + b, "b.csv");
  auto only_c = parse_csv(header + c, "c.csv");
  ASSERT_TRUE(all.ok() && only_a.ok() && only_b.ok() && only_c.ok());
  auto cv = cross_validate_by_source({*all}, {"runs.csv"}, &load_cluster);
  ASSERT_TRUE(cv.ok()) << cv.error();
  ASSERT_EQ(cv->held_out.rows.size(), 4u);
  auto held = [&](const std::string& id) {
    for (const RowPrediction& r : cv->held_out.rows) {
      if (r.row_id == id) return r.predicted;
    }
    ADD_FAILURE() << "no row " << id;
    return 0.0;
  };
  ValidateOptions fit;
  fit.fit = true;
  auto fa = validate_runs({*only_a}, {"a.csv"}, &load_cluster, fit);
  ASSERT_TRUE(fa.ok()) << fa.error();
  const StackParams ds = fa->params.at("deepspeed-zero3");
  EXPECT_GT(std::fabs(ds.gemm_scale - 1) + std::fabs(ds.overhead_scale - 1), 0.05);  // the fit moved
  auto price = [&](const CsvTable& t, const std::string& profile, const StackParams& q) {
    ValidateOptions o;
    o.params[profile] = q;
    auto r = validate_runs({t}, {"t.csv"}, &load_cluster, o);
    EXPECT_TRUE(r.ok() && r->rows.size() == 1u);
    return r.ok() && !r->rows.empty() ? r->rows[0].predicted : 0.0;
  };
  const double family = price(*only_b, "megatron-deepspeed", ds);
  EXPECT_NEAR(held("3"), family, 1e-9 * family);
  EXPECT_GT(std::fabs(family / price(*only_b, "megatron-deepspeed", StackParams{}) - 1), 0.01);
  const double neutral = price(*only_c, "llm.c", StackParams{});
  EXPECT_NEAR(held("4"), neutral, 1e-9 * neutral);
  // The report says which held-out profiles were lone, and how each was priced.
  // A is lone too: held out, its ZeRO-3 profile takes the family's fit on B's row.
  ASSERT_EQ(cv->lone_profiles.size(), 3u);
  for (const CrossValidation::LoneProfile& l : cv->lone_profiles) {
    if (l.source == "A") {
      EXPECT_EQ(l.profile, "deepspeed-zero3");
      EXPECT_EQ(l.family_rows, 1u);
    } else if (l.source == "B") {
      EXPECT_EQ(l.profile, "megatron-deepspeed");
      EXPECT_EQ(l.family, "deepspeed");
      EXPECT_EQ(l.family_rows, 2u);
    } else {
      EXPECT_EQ(l.source, "C");
      EXPECT_EQ(l.profile, "llm.c");
      EXPECT_EQ(l.family_rows, 0u);
    }
  }
  EXPECT_EQ(profile_family("megatron-deepspeed"), profile_family("deepspeed-zero3"));
  EXPECT_EQ(profile_family("megatron-core"), profile_family("megatron-lm"));
  EXPECT_EQ(profile_family("torchtitan-compile"), profile_family("torchtitan"));
  EXPECT_EQ(profile_family("llm.c"), "llm.c");
}

TEST(CalibrationFit, RecoversAKnownCurve) {
  // Rates generated from P = 300 GFLOP/s, h = 48 are fitted back.
  std::vector<GemmSample> s;
  for (double m : {64.0, 256.0, 1024.0}) {
    for (double n : {64.0, 768.0}) {
      for (double k : {128.0, 3072.0}) s.push_back({m, n, k, 300e9 * m / (m + 48) * n / (n + 48) * k / (k + 48)});
    }
  }
  const GemmFit f = fit_gemm_curve(s);
  EXPECT_NEAR(f.half_dim, 48, 1e-9);
  EXPECT_NEAR(f.peak, 300e9, 1e-3 * 300e9);
  EXPECT_LT(f.rms_rel_error, 1e-9);
}

TEST(CalibrationFit, MemoryOpsRecoverOverheadAndBandwidth) {
  // t = 3 us + bytes / 20 GB/s, sizes from 4 KB to 64 MB.
  std::vector<TimedBytes> s;
  for (double b = 4096; b <= 64e6; b *= 4) s.push_back({b, 3e-6 + b / 20e9});
  const OverheadBandwidthFit f = fit_overhead_bandwidth(s);
  EXPECT_NEAR(f.overhead, 3e-6, 1e-12);
  EXPECT_NEAR(f.bytes_per_s, 20e9, 1e-3 * 20e9);
  EXPECT_LT(f.rms_rel_error, 1e-9);
  // A negative intercept is clamped: the overhead is never below zero.
  std::vector<TimedBytes> fast = {{1e3, 0.5e-6}, {1e6, 1e-4}, {1e7, 1.01e-3}};
  const OverheadBandwidthFit g = fit_overhead_bandwidth(fast);
  EXPECT_GE(g.overhead, 0);
  EXPECT_GT(g.bytes_per_s, 0);
}

TEST(CalibrationFit, AttentionEfficiencyIsTheMedianThatExplainsEachTime) {
  // Each sample: 1 GFLOP of attention matmuls at 100 GFLOP/s peak plus 2 ms
  // of other work; measured 2 ms + 1e9 / (100e9 * 0.25) = 42 ms -> 0.25.
  std::vector<AttentionSample> s = {{1e9, 2e-3, 42e-3}, {2e9, 1e-3, 81e-3}, {1e9, 2e-3, 1.0}};
  EXPECT_NEAR(fit_attention_efficiency(s, 100e9), 0.25, 1e-12);
  // Measured faster than the rest alone (noise): that sample cannot be solved and is skipped.
  std::vector<AttentionSample> bad = {{1e9, 5e-3, 4e-3}};
  EXPECT_EQ(fit_attention_efficiency(bad, 100e9), 0.0);
}

TEST(CalibrationFit, AttentionTwoParametersRecoverMatmulAndScoreCosts) {
  // Peak 100 GFLOP/s at 0.2 (u = 5e-11 s/FLOP); 50 GB/s at 0.1 (v = 2e-10 s/byte); 10 us overhead.
  auto t = [](double f, double b) { return 1e-5 + f * 5e-11 + b * 2e-10; };
  std::vector<AttentionSample2> s = {{1e9, 1e6, 1e-5, t(1e9, 1e6)}, {4e8, 4e6, 1e-5, t(4e8, 4e6)}};
  double a = 0, sm = 0;
  ASSERT_TRUE(fit_attention_two(s, 100e9, 50e9, &a, &sm));
  EXPECT_NEAR(a, 0.2, 1e-9);
  EXPECT_NEAR(sm, 0.1, 1e-9);
  // Proportional samples (same shape twice) cannot separate the costs.
  std::vector<AttentionSample2> same = {{1e9, 1e6, 1e-5, t(1e9, 1e6)}, {2e9, 2e6, 2e-5, 2 * t(1e9, 1e6)}};
  EXPECT_FALSE(fit_attention_two(same, 100e9, 50e9, &a, &sm));
}

}  // namespace
}  // namespace tera

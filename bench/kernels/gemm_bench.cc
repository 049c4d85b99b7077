// GEMM throughput on the projection shapes of LLaDA-8B and Dream-7B, per ISA
// path, weight type, M and thread count, with achieved int8 ops/s and % of
// the measured register-only peak of that path (peak.h) as counters.
//
//   dllm_bench_kernels [--sweep=default|full] [--results=PATH] [benchmark flags]
//
// default: M in {16, 32, 144}, every shape but the output head, 1 and 2
//          threads, min time 0.1 s (about 3-6 min per ISA path on 2 cores);
// full:    M in {16, 32, 64, 144, 256, 512} and the output head (K=4096,
//          N=126464) too (about an hour on 2 cores).
// Weights come from memory, as in a forward pass (a ring of copies larger
// than the last-level cache); each record has the weight stream's bytes/s
// beside the measured read bandwidth, the bound at small M.
// Attention (kernels/attention.h) on LLaDA-8B's heads (32 x 128) over
// canvases of 144 and 512, per path and thread count, in FP32 FLOP/s and %
// of the measured FP32 FMA peak of that path.
// --results writes the records scripts/bench-kernels stores in
// bench/results/. The scalar path is not swept (it is the test oracle).
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/enumerable_thread_specific.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "engine/parallel/parallel_gemm.h"
#include "engine/parallel/read_bandwidth.h"
#include "kernels/attention.h"
#include "kernels/cpu_features.h"
#include "kernels/gemm.h"
#include "kernels/peak.h"
#include "kernels/quantize_act.h"
#include "kernels/quantized_matrix.h"
#include "kernels/vector_ops.h"

namespace dllm {
namespace {

struct Shape {
  const char* model;
  int64_t k, n;
};
const Shape kShapes[] = {
    {"llada-8b", 4096, 4096},
    {"llada-8b", 4096, 12288},
    {"llada-8b", 12288, 4096},
    {"dream-7b", 3584, 3584},
    {"dream-7b", 3584, 512},
    {"dream-7b", 3584, 18944},
    {"dream-7b", 18944, 3584},
    {"llada-8b-head", 4096, 126464},
    // One expert of LLaDA2.0-mini (256 experts of 512 over d 2048): gate/up,
    // then down. A 32-row block step spreads its rows over most experts, one
    // to four each: run at m 1, 2, 4 (and 32) against the read bandwidth.
    {"llada2-mini-expert", 2048, 512},
    {"llada2-mini-expert", 512, 2048},
};
bool IsExpertShape(const Shape& s) { return std::string(s.model) == "llada2-mini-expert"; }
const GgmlType kTypes[] = {GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kQ8_0, GgmlType::kQ4_0};

// Random but valid weight bytes: codes random, block scales a fixed 0.01.
std::vector<uint8_t> RandomWeightBytes(GgmlType type, int64_t n, int64_t k) {
  const GgmlTypeTraits& t = TraitsOf(type);
  std::vector<uint8_t> out(RowBytes(type, k) * n);
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < out.size(); i += 8) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    std::memcpy(out.data() + i, &s, std::min<size_t>(8, out.size() - i));
  }
  const uint16_t d = 0x211f;  // ~0.01 as IEEE half
  const size_t d_at = type == GgmlType::kQ6_K ? 208 : 0;
  for (size_t b = 0; b < out.size() / t.type_size; ++b) {
    std::memcpy(out.data() + b * t.type_size + d_at, &d, 2);
    if (type == GgmlType::kQ4_K) std::memcpy(out.data() + b * t.type_size + 2, &d, 2);
  }
  return out;
}

// The packed matrices of the running benchmark: copies of one matrix,
// enough to fill twice a 64 MiB last-level cache, used in turn, so every
// GEMM reads its weights from memory as a forward pass does (each layer's
// weights are new to the caches), and small M is judged against the read
// bandwidth, not L3's. Benchmarks are registered grouped by (type, shape),
// so one ring at a time suffices.
const std::vector<std::unique_ptr<PackedMatrix>>& PackedRingFor(GgmlType type, int64_t n,
                                                                int64_t k) {
  static std::vector<std::unique_ptr<PackedMatrix>> ring;
  static GgmlType c_type;
  static int64_t c_n = -1, c_k = -1;
  if (ring.empty() || c_type != type || c_n != n || c_k != k) {
    ring.clear();
    const std::vector<uint8_t> bytes = RandomWeightBytes(type, n, k);
    constexpr size_t kRingBytes = size_t{128} << 20;
    // Up to 256 copies: a MoE layer's experts (LLaDA2-mini's 256 experts of
    // 0.6 MB at Q4_K are 150 MB, past any L3).
    const size_t copies = std::clamp<size_t>(kRingBytes / PackedBytes(type, n, k) + 1, 1, 256);
    for (size_t i = 0; i < copies; ++i) {
      ring.push_back(std::make_unique<PackedMatrix>(type, bytes.data(), n, k));
    }
    c_type = type, c_n = n, c_k = k;
  }
  return ring;
}

// Deterministic inputs in [-0.5, 0.5): the same every run, so runs compare.
void FillUniform(std::vector<float>* v, uint32_t seed) {
  for (float& x : *v) {
    x = static_cast<float>((seed = seed * 1664525u + 1013904223u) >> 8) / (1 << 24) - 0.5f;
  }
}

struct Record {
  std::string name;
  NamedGemmKernels table;  // plain AVX2 and AVX-VNNI are separate paths
  double peak_per_thread;  // ops/s of the table's own peak loop
  GgmlType type;
  Shape shape;
  int64_t m;
  int threads;
};
std::vector<Record>& Records() {
  static std::vector<Record> r;
  return r;
}
std::map<int, double>& PeakPerThread() {  // by IsaLevel (the levels' own tables)
  static std::map<int, double> p;
  return p;
}

void BM_Gemm(benchmark::State& state, Record rec) {
  const auto& ring = PackedRingFor(rec.type, rec.shape.n, rec.shape.k);
  const int64_t m = rec.m, k = rec.shape.k, n = rec.shape.n;
  std::vector<float> x(m * k), y(m * n);
  FillUniform(&x, 12345);
  std::unique_ptr<uint8_t, void (*)(void*)> qbuf(
      static_cast<uint8_t*>(std::aligned_alloc(64, (QuantizedRowsBytes(m, k) + 63) / 64 * 64)),
      std::free);
  const QuantizedRows xq = CarveQuantizedRows(qbuf.get(), m, k);
  QuantizeRows(x.data(), k, m, xq);
  GemmArgs args;
  args.x = &xq;
  args.y = y.data();
  args.y_stride = n;
  args.num_rows = m;
  const GemmKernels& kernels = *rec.table.kernels;
  tbb::task_arena arena(rec.threads);
  size_t next = 0;
  for (auto _ : state) {
    args.w = &ring[next]->view();
    next = (next + 1) % ring.size();
    ParallelGemm(kernels, args, &arena);
    benchmark::DoNotOptimize(y.data());
  }
  const double ops = 2.0 * m * n * k;
  state.counters["weight_bytes_per_s"] = benchmark::Counter(
      static_cast<double>(ring[0]->bytes()), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["ops_per_s"] =
      benchmark::Counter(ops, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["m"] = m;
  state.counters["k"] = k;
  state.counters["n"] = n;
  state.counters["threads"] = rec.threads;
  state.counters["peak_ops_per_s"] = rec.peak_per_thread * rec.threads;
}

struct AttnRecord {
  std::string name;
  IsaLevel isa;
  int n_tokens;
  int threads;
};
std::vector<AttnRecord>& AttnRecords() {
  static std::vector<AttnRecord> r;
  return r;
}
std::map<int, double>& ReadBandwidth() {  // bytes/s by thread count
  static std::map<int, double> b;
  return b;
}
std::map<int, double>& Fp32PeakPerThread() {  // by IsaLevel
  static std::map<int, double> p;
  return p;
}

// One layer's attention over the canvas, as the forward pass splits it: a
// task per (head, kAttnRowsPerCall query rows).
void BM_Attention(benchmark::State& state, AttnRecord rec) {
  AttentionShape s;
  s.n_tokens = rec.n_tokens;
  s.n_head = s.n_head_kv = 32;
  s.head_dim = 128;
  s.q_stride = s.kv_stride = s.out_stride = s.n_head * s.head_dim;
  s.scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  std::vector<float> q(static_cast<size_t>(s.n_tokens) * s.q_stride), k(q.size()), v(q.size()),
      out(q.size());
  FillUniform(&q, 777);
  FillUniform(&k, 778);
  FillUniform(&v, 779);
  const AttentionFn attend = SelectAttention(rec.isa);
  const int blocks = (s.n_tokens + kAttnRowsPerCall - 1) / kAttnRowsPerCall;
  tbb::enumerable_thread_specific<std::vector<float>> scratch(
      [&] { return std::vector<float>(AttentionScratchFloats(s)); });
  tbb::task_arena arena(rec.threads);
  for (auto _ : state) {
    arena.execute([&] {
      tbb::parallel_for(
          tbb::blocked_range<int>(0, s.n_head * blocks, 1),
          [&](const tbb::blocked_range<int>& range) {
            for (int t = range.begin(); t != range.end(); ++t) {
              const int h = t / blocks, q0 = (t % blocks) * kAttnRowsPerCall;
              attend(s, q.data(), k.data(), v.data(), out.data(), h, q0,
                     std::min(s.n_tokens, q0 + kAttnRowsPerCall), nullptr, scratch.local().data());
            }
          },
          tbb::simple_partitioner());
    });
    benchmark::DoNotOptimize(out.data());
  }
  // Q K^T and P V: 2 FLOP per multiply-add, L x L x head_dim of each per head.
  const double flops = 4.0 * s.n_tokens * s.n_tokens * s.head_dim * s.n_head;
  state.counters["ops_per_s"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak_ops_per_s"] = Fp32PeakPerThread()[static_cast<int>(rec.isa)] * rec.threads;
}

// The honest peaks (peak.h), read once: every loop this machine runs.
std::vector<PeakReading>& Peaks() {
  static std::vector<PeakReading> p;
  return p;
}

// The reading of `loop` taken at start-up (0 for none).
double MeasuredPeak(std::optional<PeakLoop> loop) {
  for (const PeakReading& p : Peaks()) {
    if (loop && p.loop == *loop) return p.measured;
  }
  return 0;
}

// One row quantizer over an M x K activation block (LLaDA-8B's FFN input at
// M = 144 is 144 x 12288): the time every projection's input costs.
void BM_QuantizeRows(benchmark::State& state, QuantizeRowFn quantize, int64_t m, int64_t k) {
  std::vector<float> x(static_cast<size_t>(m * k));
  FillUniform(&x, 21);
  std::vector<int8_t> q(x.size());
  std::vector<float> scale(x.size() / kActBlock);
  std::vector<int32_t> sum16(x.size() / 16);
  for (auto _ : state) {
    for (int64_t r = 0; r < m; ++r) {
      quantize(x.data() + r * k, k, q.data() + r * k, scale.data() + r * (k / kActBlock),
               sum16.data() + r * (k / 16));
    }
    benchmark::DoNotOptimize(q.data());
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(m * k * sizeof(float)),
                                              benchmark::Counter::kIsIterationInvariantRate,
                                              benchmark::Counter::kIs1000);
}

// DiffusionGemma's soft embedding, one column block of one task: 256
// canvas rows' probabilities (a row of the 262k vocabulary apart) times 16
// dequantized embedding rows of 256 columns, added to each row's sums; the
// kernel runs V / 16 times per block and step. Against the level's FP32 peak.
void BM_AddWeightedRows(benchmark::State& state, IsaLevel isa) {
  constexpr int64_t kRows = 256, kK = 16, kN = 256, kLdw = 4096 + 16, kLdacc = 2816;
  std::vector<float> w(static_cast<size_t>(kRows * kLdw)), e(static_cast<size_t>(kK * kN));
  std::vector<float> acc(static_cast<size_t>(kRows * kLdacc));
  FillUniform(&w, 31);
  FillUniform(&e, 32);
  const VectorKernels& vk = SelectVectorKernels(isa);
  int64_t v0 = 0;
  for (auto _ : state) {
    // March along the vocabulary as the forward does, so the weights come
    // from L2 and beyond rather than one hot line.
    vk.add_weighted_rows(w.data() + v0, kLdw, kRows, e.data(), kN, kK, kN, acc.data(), kLdacc);
    v0 = (v0 + kK) % (kLdw - kK);
    benchmark::DoNotOptimize(acc.data());
  }
  const double flops = 2.0 * kRows * kK * kN;
  state.counters["GFLOP/s"] = benchmark::Counter(
      flops, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  const double peak = Fp32PeakPerThread()[static_cast<int>(isa)];
  if (peak > 0) {
    state.counters["%peak"] =
        benchmark::Counter(100.0 * flops / peak, benchmark::Counter::kIsIterationInvariantRate);
  }
}

void BM_Peak(benchmark::State& state, PeakLoop loop) {
  double v = 0;
  for (auto _ : state) v = MeasurePeak(loop, 0.2);
  state.counters["ops_per_s"] = v;
}

// Collects every run for the --results file while printing as usual.
class CollectingReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.run_type == Run::RT_Iteration && !r.error_occurred) runs_.push_back(r);
    }
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.run_type != Run::RT_Iteration) continue;  // aggregates (stddev...) are not rates
      const auto ops = r.counters.find("ops_per_s"), peak = r.counters.find("peak_ops_per_s");
      if (ops != r.counters.end() && peak != r.counters.end() && peak->second.value > 0 &&
          ops->second.value > peak->second.value) {
        std::fprintf(stderr,
                     "WARNING: %s runs at %.1f G ops/s, above the peak it is compared with "
                     "(%.1f G): that peak is wrong\n",
                     r.benchmark_name().c_str(), ops->second.value / 1e9, peak->second.value / 1e9);
      }
    }
  }
  const std::vector<Run>& runs() const { return runs_; }

 private:
  std::vector<Run> runs_;
};

std::string JsonEscape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) o += c;
  }
  return o;
}

bool WriteResults(const std::string& path, const std::string& sweep,
                  const std::vector<benchmark::BenchmarkReporter::Run>& runs) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return false;
  const CpuFeatures& cpu = GetCpuFeatures();
  std::fprintf(f, "{\n  \"cpu_model\": \"%s\",\n  \"cpu_flags\": \"%s\",\n  \"sweep\": \"%s\",\n",
               JsonEscape(cpu.brand).c_str(), JsonEscape(CpuFlagsString(cpu)).c_str(),
               sweep.c_str());
  std::fprintf(f, "  \"read_bandwidth_bytes_per_s\": {\"1\": %.4g, \"2\": %.4g},\n",
               ReadBandwidth()[1], ReadBandwidth()[2]);
  std::fprintf(f, "  \"peak_ops_per_s_per_thread\": {");
  bool first = true;
  for (const auto& [isa, v] : PeakPerThread()) {
    std::fprintf(f, "%s\"%s\": %.4g", first ? "" : ", ", IsaLevelName(static_cast<IsaLevel>(isa)),
                 v);
    first = false;
  }
  // Each loop's measured rate beside its documented bound (peak.h).
  std::fprintf(f, "},\n  \"peaks\": [\n");
  first = true;
  for (const PeakReading& p : Peaks()) {
    const PeakSpec& spec = PeakSpecOf(p.loop);
    std::fprintf(f,
                 "%s    {\"loop\": \"%s\", \"instruction\": \"%s\", \"measured_ops_per_s\": %.4g, "
                 "\"clock_hz\": %.4g, \"bound_ops_per_s\": %.4g, \"measured_over_bound\": %.3f}",
                 first ? "" : ",\n", spec.name, spec.instruction, p.measured, p.clock_hz, p.bound,
                 p.ratio());
    first = false;
  }
  std::fprintf(f, "\n  ],\n  \"results\": [\n");
  first = true;
  for (const auto& run : runs) {
    const std::string name = run.benchmark_name();
    for (const Record& rec : Records()) {
      if (name.rfind(rec.name, 0) != 0) continue;
      const double ops = run.counters.at("ops_per_s");
      const double peak = rec.peak_per_thread * rec.threads;
      std::fprintf(
          f,
          "%s    {\"isa\": \"%s\", \"type\": \"%s\", \"model\": \"%s\", \"m\": %lld, \"k\": %lld, "
          "\"n\": %lld, \"threads\": %d, \"seconds_per_gemm\": %.6g, \"ops_per_s\": %.6g, "
          "\"pct_of_peak\": %.2f, \"weight_bytes_per_s\": %.6g, \"pct_of_read_bandwidth\": %.2f}",
          first ? "" : ",\n", rec.table.name, GgmlTypeName(rec.type), rec.shape.model,
          static_cast<long long>(rec.m), static_cast<long long>(rec.shape.k),
          static_cast<long long>(rec.shape.n), rec.threads,
          run.GetAdjustedRealTime() / 1e9 * (run.time_unit == benchmark::kMillisecond ? 1e6 : 1),
          ops, peak > 0 ? 100.0 * ops / peak : 0.0, run.counters.at("weight_bytes_per_s").value,
          100.0 * run.counters.at("weight_bytes_per_s").value / ReadBandwidth()[rec.threads]);
      first = false;
      break;
    }
  }
  std::fprintf(f, "\n  ],\n  \"attention\": [\n");
  first = true;
  for (const auto& run : runs) {
    const std::string name = run.benchmark_name();
    for (const AttnRecord& rec : AttnRecords()) {
      if (name.rfind(rec.name, 0) != 0) continue;
      const double flops = run.counters.at("ops_per_s");
      const double peak = Fp32PeakPerThread()[static_cast<int>(rec.isa)] * rec.threads;
      std::fprintf(f,
                   "%s    {\"isa\": \"%s\", \"n_tokens\": %d, \"n_head\": 32, \"head_dim\": 128, "
                   "\"threads\": %d, \"flops_per_s\": %.6g, \"pct_of_fp32_peak\": %.2f}",
                   first ? "" : ",\n", IsaLevelName(rec.isa), rec.n_tokens, rec.threads, flops,
                   peak > 0 ? 100.0 * flops / peak : 0.0);
      first = false;
      break;
    }
  }
  std::fprintf(f, "\n  ]\n}\n");
  return std::fclose(f) == 0;
}

}  // namespace
}  // namespace dllm

int main(int argc, char** argv) {
  using namespace dllm;
  std::string sweep = "default", results;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--sweep=", 8) == 0) {
      sweep = argv[i] + 8;
    } else if (std::strncmp(argv[i], "--results=", 10) == 0) {
      results = argv[i] + 10;
    } else {
      args.push_back(argv[i]);
    }
  }
  const bool full = sweep == "full";
  std::vector<IsaLevel> isas;
  for (IsaLevel l : SupportedIsaLevels()) {
    if (l == IsaLevel::kScalar) continue;
    isas.push_back(l);
  }
  for (PeakLoop loop : SupportedPeakLoops()) {
    const PeakReading p = ReadPeak(loop, 0.6);
    Peaks().push_back(p);
    const PeakSpec& spec = PeakSpecOf(loop);
    std::fprintf(
        stderr,
        "peak %-16s %-18s %8.1f G ops/s per core; bound %8.1f G (%g/cycle x %g ops x %.2f GHz): "
        "%.0f%%%s\n",
        spec.name, spec.instruction, p.measured / 1e9, p.bound / 1e9, spec.instructions_per_cycle,
        spec.ops_per_instruction, p.clock_hz / 1e9, 100 * p.ratio(),
        p.exceeds_bound() ? "  WARNING: ABOVE THE DOCUMENTED BOUND: the loop or the table is wrong"
                          : "");
    benchmark::RegisterBenchmark((std::string("peak/") + spec.name).c_str(), BM_Peak, loop)
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond);
  }
  for (IsaLevel l : isas) PeakPerThread()[static_cast<int>(l)] = MeasuredPeak(Int8PeakLoopOf(l));
  std::vector<AttentionFn> attention_paths;
  for (IsaLevel l : isas) {
    Fp32PeakPerThread()[static_cast<int>(l)] = MeasuredPeak(Fp32PeakLoopOf(l));
    // AMX runs the AVX-512 attention: time each implementation once.
    const AttentionFn fn = SelectAttention(l);
    if (std::find(attention_paths.begin(), attention_paths.end(), fn) != attention_paths.end())
      continue;
    attention_paths.push_back(fn);
    for (int n_tokens : {144, 512}) {
      for (int threads : {1, 2}) {
        AttnRecord rec{std::string("attention/isa:") + IsaLevelName(l) +
                           "/L:" + std::to_string(n_tokens) + "/threads:" + std::to_string(threads),
                       l, n_tokens, threads};
        AttnRecords().push_back(rec);
        benchmark::RegisterBenchmark(rec.name.c_str(), BM_Attention, rec)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime()
            ->MinTime(0.2);
      }
    }
  }
  for (IsaLevel l : isas) {
    benchmark::RegisterBenchmark(
        (std::string("add_weighted_rows/isa:") + IsaLevelName(l) + "/rows:256/k:16/n:256").c_str(),
        BM_AddWeightedRows, l)
        ->Unit(benchmark::kMicrosecond)
        ->MinTime(0.2);
  }
  for (const auto& [name, fn] :
       {std::pair{"scalar", &QuantizeRowScalar}, std::pair{"avx2", &QuantizeRowAvx2}}) {
    if (fn == &QuantizeRowAvx2 && !IsaLevelSupported(IsaLevel::kAvx2)) continue;
    for (int64_t k : {4096, 12288}) {
      benchmark::RegisterBenchmark(
          (std::string("quantize/") + name + "/m:144/k:" + std::to_string(k)).c_str(),
          BM_QuantizeRows, fn, int64_t{144}, k)
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.1);
    }
  }
  for (int threads : {1, 2}) ReadBandwidth()[threads] = MeasureReadBandwidth(threads);
  std::fprintf(stderr, "read bandwidth: %.1f GB/s (1 thread), %.1f GB/s (2 threads)\n",
               ReadBandwidth()[1] / 1e9, ReadBandwidth()[2] / 1e9);
  // 16 and 32 rows: a cached step's block (weight-bandwidth-bound); 144: an
  // exact LLaDA step's canvas (compute-bound).
  const std::vector<int64_t> ms =
      full ? std::vector<int64_t>{16, 32, 64, 144, 256, 512} : std::vector<int64_t>{16, 32, 144};
  for (GgmlType type : kTypes) {
    for (const Shape& shape : kShapes) {
      if (!full && shape.n > 100000) continue;
      for (const NamedGemmKernels& table : RunnableGemmKernels()) {
        if (table.kernels->isa == IsaLevel::kScalar) continue;  // the test oracle
        // Each table against its own instruction's peak: plain AVX2 against
        // vpmaddubsw's, the level's table against the level's loop.
        const bool plain_avx2 = std::string(table.name) == "avx2";
        const double peak = MeasuredPeak(plain_avx2 ? std::optional(PeakLoop::kAvx2Int8)
                                                    : Int8PeakLoopOf(table.kernels->isa));
        const std::vector<int64_t> shape_ms =
            IsExpertShape(shape) ? std::vector<int64_t>{1, 2, 4, 32} : ms;
        for (int64_t m : shape_ms) {
          for (int threads : {1, 2}) {
            Record rec{std::string("gemm/isa:") + table.name + "/type:" + GgmlTypeName(type) +
                           "/m:" + std::to_string(m) + "/k:" + std::to_string(shape.k) +
                           "/n:" + std::to_string(shape.n) + "/threads:" + std::to_string(threads),
                       table,
                       peak,
                       type,
                       shape,
                       m,
                       threads};
            Records().push_back(rec);
            benchmark::RegisterBenchmark(rec.name.c_str(), BM_Gemm, rec)
                ->Unit(benchmark::kMillisecond)
                ->UseRealTime()
                ->MinTime(full ? 0.5 : 0.1);
          }
        }
      }
    }
  }
  int bargc = static_cast<int>(args.size());
  benchmark::Initialize(&bargc, args.data());
  if (benchmark::ReportUnrecognizedArguments(bargc, args.data())) return 1;
  CollectingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  if (!results.empty() && !WriteResults(results, sweep, reporter.runs())) {
    std::fprintf(stderr, "gemm_bench: cannot write %s\n", results.c_str());
    return 1;
  }
  return 0;
}

// The AVX-512 VNNI tile's group loop taken apart (issue #39): the group
// loop of kernels/gemm_avx512vnni.cc on a 4-row x 2-panel tile (64
// `vpdpbusd` a group into 8 int32 chains; the kernel's 4 x 3 tile made GCC
// spill the float accumulators here, which the kernel's own loop does not,
// and a spill would be measured instead of the part), with one more of the
// loop's other parts switched on at each stage, so that what each part
// costs shows on the hardware itself (these VMs have no PMU). Data stay in
// L1 (a ring of 16 groups), so memory bandwidth plays no part: this is the
// compute-bound loop of the M = 144 shapes.
//
// Stages (each includes the ones before):
//   dots        64 vpdpbusd on operands held in registers (the ceiling)
//   weights     the weight vectors loaded from memory (8-bit codes: 16 loads)
//   activations each X row's 4 bytes broadcast from memory (32 broadcasts)
//   unpack      4-bit codes: 8 loads, then AND / shift / AND per two vectors
//   epilogue    per row and panel: cvt(dot) * d, then acc += t * s_x
// and, instead of the epilogue, the design issue #39 asks about:
//   superblock  K-quant activations at the super-block: each chain's group
//               sum times the weight rows' 6-bit sub-block scale, added in
//               int32 (`vpmulld`, `vpaddd`); the float epilogue once per 8
//               groups (256 elements), its accumulators in memory (the
//               registers hold the dot and the super-block chains)
//   mins        the epilogue, then Q4_K's free mins as the kernel adds them:
//               acc += c * (s_x sum(q)) per row, panel and group
//   actscale256 one activation scale per 256 elements (llama.cpp's Q8_K), the
//               weights' per-group scale kept in float: per group
//               acc256 += cvt(dot) * d (one FMA), per 8 groups
//               acc += acc256 * s_x (in memory)
//
// Reported: int8 ops/s (2 per multiply-add) and groups/s; kernels/README.md
// reads them against the peak loop of kernels/peak.cc.
// GCC 12 flags `_mm512_undefined_ps()` inside `_mm512_cvtepi32_ps` as
// uninitialized once inlined, as in kernels/gemm_avx512vnni.cc: a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/cpu_features.h"

namespace {

constexpr int R = 4, P = 2, kRing = 16;

enum Stage { kDots, kWeights, kActivations, kUnpack, kEpilogue, kSuperBlock, kActScale256, kMins };

struct Buffers {
  // Per group: P panels x 8 quad-rows of 64 bytes (8-bit codes), or P x 4
  // of 64 (nibbles); R rows x 32 activation bytes; P x 16 scales.
  alignas(64) uint8_t codes[kRing][P][8][64];
  alignas(64) int8_t x[kRing][R][32];
  alignas(64) float d[kRing][P][16];
  alignas(64) int32_t sub_scale[kRing][P][16];  // 6-bit, per weight row
  alignas(64) float c[kRing][P][16];            // Q4_K's group offsets (mins)
  int32_t sum[kRing][R];                        // each row's activation sum per group
  float sx[kRing][R];
  Buffers() {
    uint32_t s = 1;
    auto next = [&] { return (s = s * 1664525u + 1013904223u) >> 24; };
    for (auto& g : codes)
      for (auto& p : g)
        for (auto& q : p)
          for (auto& b : q) b = static_cast<uint8_t>(next());
    for (auto& g : x)
      for (auto& r : g)
        for (auto& b : r) b = static_cast<int8_t>(next());
    for (auto& g : d)
      for (auto& p : g)
        for (float& v : p) v = 1e-3f * static_cast<float>(next());
    for (auto& g : sx)
      for (float& v : g) v = 1e-2f * static_cast<float>(next());
    for (auto& g : c)
      for (auto& p : g)
        for (float& v : p) v = -1e-3f * static_cast<float>(next());
    for (auto& g : sum)
      for (int32_t& v : g) v = static_cast<int32_t>(next()) - 128;
    for (auto& g : sub_scale)
      for (auto& p : g)
        for (int32_t& v : p) v = static_cast<int32_t>(next() & 63);
  }
};

#define DLLM_AVX512VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

DLLM_AVX512VNNI inline __m512i Bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

template <Stage kStage>
DLLM_AVX512VNNI __attribute__((noinline)) void RunGroups(const Buffers& b, int64_t groups,
                                                         __m512i (&dot_out)[R][P],
                                                         __m512 (&acc_out)[R][P]) {
  // Locals, so that the chains stay in registers (the caller's arrays could
  // alias the buffers as far as the compiler knows).
  __m512i dot[R][P];
  __m512 acc[R][P];
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p) dot[r][p] = dot_out[r][p], acc[r][p] = acc_out[r][p];
  __m512i isum[R][P];  // kSuperBlock: the super-block's integer sums
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p) isum[r][p] = _mm512_setzero_si512();
  const __m512i nib = _mm512_set1_epi8(0x0f);
  __m512i held_w[P], held_x[R];
  for (int p = 0; p < P; ++p) held_w[p] = _mm512_load_si512(b.codes[0][p][0]);
  for (int r = 0; r < R; ++r) held_x[r] = Bcast4(b.x[0][r]);
  for (int64_t g = 0; g < groups; ++g) {
    const int i = static_cast<int>(g & (kRing - 1));
    if constexpr (kStage >= kEpilogue) {
      for (int r = 0; r < R; ++r)
        for (int p = 0; p < P; ++p) dot[r][p] = _mm512_setzero_si512();
    }
    // Fully unrolled, as the kernel's GroupDots is (a loop left rolled keeps
    // the 12 chains moving between registers every iteration).
#pragma GCC unroll 8
    for (int q = 0; q < 8; ++q) {
      // Nibbles: quad-rows 0..3 are the low nibbles of the 4 loads, 4..7 the
      // high ones of the same loads (the kernel's 4 x 2 halves).
      const int load = kStage >= kUnpack ? q % 4 : q;
      __m512i wv[P];
#pragma GCC unroll 3
      for (int p = 0; p < P; ++p) {
        if constexpr (kStage == kDots) {
          wv[p] = held_w[p];
        } else if constexpr (kStage < kUnpack) {
          wv[p] = _mm512_load_si512(b.codes[i][p][load]);
        } else {
          const __m512i v = _mm512_load_si512(b.codes[i][p][load]);
          wv[p] = _mm512_and_si512(q < 4 ? v : _mm512_srli_epi16(v, 4), nib);
        }
      }
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m512i xv = kStage < kActivations ? held_x[r] : Bcast4(b.x[i][r] + 4 * q);
#pragma GCC unroll 3
        for (int p = 0; p < P; ++p) dot[r][p] = _mm512_dpbusd_epi32(dot[r][p], wv[p], xv);
      }
    }
    if constexpr (kStage == kEpilogue || kStage == kMins) {
      for (int r = 0; r < R; ++r) {
        const __m512 sv = _mm512_set1_ps(b.sx[i][r]);
        for (int p = 0; p < P; ++p) {
          const __m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(dot[r][p]), _mm512_load_ps(b.d[i][p]));
          acc[r][p] = _mm512_fmadd_ps(t, sv, acc[r][p]);
        }
      }
    }
    if constexpr (kStage == kMins) {
      for (int r = 0; r < R; ++r) {
        const __m512 xs = _mm512_set1_ps(b.sx[i][r] * static_cast<float>(b.sum[i][r]));
        for (int p = 0; p < P; ++p) {
          acc[r][p] = _mm512_fmadd_ps(_mm512_load_ps(b.c[i][p]), xs, acc[r][p]);
        }
      }
    }
    if constexpr (kStage == kActScale256) {
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
#pragma GCC unroll 3
        for (int p = 0; p < P; ++p) {
          acc[r][p] =
              _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[r][p]), _mm512_load_ps(b.d[i][p]), acc[r][p]);
        }
      }
      if ((g & 7) == 7) {
        for (int r = 0; r < R; ++r) {
          const __m512 sv = _mm512_set1_ps(b.sx[i][r]);
          for (int p = 0; p < P; ++p) {
            acc_out[r][p] = _mm512_fmadd_ps(acc[r][p], sv, acc_out[r][p]);
            acc[r][p] = _mm512_setzero_ps();
          }
        }
      }
    }
    if constexpr (kStage == kSuperBlock) {
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
#pragma GCC unroll 3
        for (int p = 0; p < P; ++p) {
          isum[r][p] = _mm512_add_epi32(
              isum[r][p], _mm512_mullo_epi32(dot[r][p], _mm512_load_si512(b.sub_scale[i][p])));
        }
      }
      if ((g & 7) == 7) {
        for (int r = 0; r < R; ++r) {
          const __m512 sv = _mm512_set1_ps(b.sx[i][r]);
          for (int p = 0; p < P; ++p) {
            const __m512 t =
                _mm512_mul_ps(_mm512_cvtepi32_ps(isum[r][p]), _mm512_load_ps(b.d[i][p]));
            acc_out[r][p] = _mm512_fmadd_ps(t, sv, acc_out[r][p]);
            isum[r][p] = _mm512_setzero_si512();
          }
        }
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int p = 0; p < P; ++p) {
      dot_out[r][p] = dot[r][p];
      // The super-block stage updates acc_out in memory as it goes.
      if constexpr (kStage < kSuperBlock || kStage == kMins) acc_out[r][p] = acc[r][p];
    }
  }
}

template <Stage kStage>
void BM_TileGroupLoop(benchmark::State& state) {
  if (!dllm::GetCpuFeatures().avx512vnni) {
    state.SkipWithError("no AVX-512 VNNI on this CPU");
    return;
  }
  static const Buffers* const buffers = new Buffers();
  alignas(64) __m512i dot[R][P] = {};
  alignas(64) __m512 acc[R][P] = {};
  constexpr int64_t kGroups = 4096;
  for (auto _ : state) {
    RunGroups<kStage>(*buffers, kGroups, dot, acc);
    benchmark::DoNotOptimize(dot);
    benchmark::DoNotOptimize(acc);
  }
  const double ops = 2.0 * R * P * 8 * 64 * kGroups;  // R x P x 8 vpdpbusd of 64 multiply-adds
  state.counters["int8_ops_per_s"] =
      benchmark::Counter(ops, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["groups_per_s"] =
      benchmark::Counter(kGroups, benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK(BM_TileGroupLoop<kDots>)->Name("TileGroupLoop/1_dots");
BENCHMARK(BM_TileGroupLoop<kWeights>)->Name("TileGroupLoop/2_weights");
BENCHMARK(BM_TileGroupLoop<kActivations>)->Name("TileGroupLoop/3_activations");
BENCHMARK(BM_TileGroupLoop<kUnpack>)->Name("TileGroupLoop/4_unpack");
BENCHMARK(BM_TileGroupLoop<kEpilogue>)->Name("TileGroupLoop/5_epilogue");
BENCHMARK(BM_TileGroupLoop<kSuperBlock>)->Name("TileGroupLoop/6_superblock");
BENCHMARK(BM_TileGroupLoop<kActScale256>)->Name("TileGroupLoop/7_actscale256");
BENCHMARK(BM_TileGroupLoop<kMins>)->Name("TileGroupLoop/8_epilogue_and_mins");

}  // namespace

BENCHMARK_MAIN();

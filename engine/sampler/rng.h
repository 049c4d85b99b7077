// Counter-based random numbers for the samplers: every draw is a pure
// function of (seed, step, position, index), so a generation does not depend
// on thread count, batch composition or the order rows are visited.
// Bit-identity with PyTorch's generators is not a goal: runs at temperature
// > 0, 'random' remasking, Dream 'origin' and alg_temp > 0 match the official
// code in distribution only.
#ifndef DLLM_ENGINE_SAMPLER_RNG_H_
#define DLLM_ENGINE_SAMPLER_RNG_H_

#include <cstdint>

namespace dllm {

// Independent streams, so that e.g. the token draw and the position draw of
// one (step, position) are unrelated.
enum class RngStream : uint64_t {
  kToken = 1,       // Gumbel noise / categorical token draws
  kConfidence = 2,  // LLaDA 'random' remasking confidence
  kTransfer = 3,    // Dream 'origin' per-position transfer draws
  kPosition = 4,    // Dream alg_temp > 0 position draws
};

// SplitMix64's finaliser: a bijective mix with full avalanche.
constexpr uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Hash of the full key; each field goes through its own mixing round so that
// (step, position) = (1, 0) and (0, 1) give unrelated values.
constexpr uint64_t RngHash(uint64_t seed, RngStream stream, uint64_t step, uint64_t position,
                           uint64_t index = 0) {
  uint64_t h = SplitMix64(seed);
  h = SplitMix64(h ^ static_cast<uint64_t>(stream));
  h = SplitMix64(h ^ step);
  h = SplitMix64(h ^ position);
  return SplitMix64(h ^ index);
}

// Uniform double in the open interval (0, 1): 53 random bits, centred in
// their cell, so -log(u) and log(-log(u)) are always finite.
constexpr double RngUniform(uint64_t seed, RngStream stream, uint64_t step, uint64_t position,
                            uint64_t index = 0) {
  const uint64_t bits = RngHash(seed, stream, step, position, index) >> 11;
  return (static_cast<double>(bits) + 0.5) * 0x1.0p-53;
}

}  // namespace dllm

#endif  // DLLM_ENGINE_SAMPLER_RNG_H_

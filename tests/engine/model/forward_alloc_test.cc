// A warm forward pass and a warm sampler step allocate nothing: this test
// binary counts every operator new and requires none during the second
// ForwardPass::Run and DenoiseSession step over the same canvas class.
#include <atomic>
#include <cstdlib>
#include <new>

#include "engine/model/forward.h"
#include "engine/session/denoise_session.h"
#include "gtest/gtest.h"
#include "tests/testing/test_paths.h"
#include "tests/testing/toy_sampler.h"

namespace {
std::atomic<int64_t> g_allocations{0};
}  // namespace

void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return operator new(size); }
// The nothrow forms too (std::stable_sort's temporary buffer uses them): a
// replacement set must be complete, or a nothrow new from the runtime meets
// this file's free() (ASan: alloc-dealloc-mismatch).
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(size == 0 ? 1 : size);
}
void* operator new[](std::size_t size, const std::nothrow_t& tag) noexcept {
  return operator new(size, tag);
}
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace dllm {
namespace {

TEST(ForwardAllocTest, WarmForwardPassAllocatesNothing) {
  for (const char* name : {"tiny-llada-k-q4_k_m.gguf", "tiny-dream-k-q4_k_m.gguf"}) {
    SCOPED_TRACE(name);
    auto model = Model::Load(testing::TestDataDir() + "/models/" + name, {BestIsaLevel()});
    ASSERT_TRUE(model.ok()) << model.status();
    auto pass = ForwardPass::Create(*model, 96);
    ASSERT_TRUE(pass.ok());
    std::vector<int32_t> tokens(96, (*model)->config().tokens.mask), rows = {40, 41, 90};
    for (int i = 0; i < 16; ++i) tokens[i] = 100 + i;
    std::vector<float> logits(rows.size() * (*model)->config().n_vocab);
    ForwardStats stats;
    ASSERT_TRUE((*pass)->Run(tokens, rows, logits.data(), nullptr, &stats).ok());  // warm-up
    const int64_t before = g_allocations.load();
    ASSERT_TRUE((*pass)->Run(tokens, rows, logits.data(), nullptr, &stats).ok());
    EXPECT_EQ(g_allocations.load() - before, 0);
  }
}

// Exact, and from a dual cache (the warm steps are cached ones).
TEST(ForwardAllocTest, WarmDenoisingStepAllocatesNothing) {
  auto model =
      Model::Load(testing::TestDataDir() + "/models/tiny-dream-k-q4_k_m.gguf", {BestIsaLevel()});
  ASSERT_TRUE(model.ok());
  for (CacheMode cache : {CacheMode::kNone, CacheMode::kDual}) {
    SCOPED_TRACE(CacheModeName(cache));
    SamplerConfig c = testing::toy::Dream(64, 32, Algorithm::kEntropy);
    auto session = DenoiseSession::Create(*model, c, std::vector<int32_t>{100, 101, 102}, {cache});
    ASSERT_TRUE(session.ok());
    ASSERT_TRUE((*session)->Advance().ok());  // warm-up: per-thread scratch
    ASSERT_TRUE((*session)->Advance().ok());
    const int64_t before = g_allocations.load();
    absl::StatusOr<StepReport> step = (*session)->Advance();
    ASSERT_TRUE(step.ok());
    EXPECT_EQ(g_allocations.load() - before, 0);
    EXPECT_EQ(step->cache_use, cache == CacheMode::kNone ? CacheUse::kNone : CacheUse::kRead);
  }
}

}  // namespace
}  // namespace dllm

// The counting CPU allocator and the memory limit.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "accumbench/trace.hpp"
#include "compat/compat.hpp"

namespace ab = accumbench;

TEST(CountingAllocator, CountsLiveBytesAndPeak) {
  ab::CountingCpuAllocator& counter = ab::CountingCpuAllocator::install();
  const int64_t before = counter.current_bytes();
  counter.reset_peak();
  {
    at::Tensor a = torch::empty({1024, 256}, torch::kFloat);  // 1 MiB
    EXPECT_EQ(counter.current_bytes() - before, 1024 * 256 * 4);
    at::Tensor b = torch::empty({512}, torch::kDouble);        // 4 KiB
    EXPECT_EQ(counter.current_bytes() - before, 1024 * 256 * 4 + 512 * 8);
  }
  EXPECT_EQ(counter.current_bytes(), before);
  EXPECT_EQ(counter.peak_bytes() - before, 1024 * 256 * 4 + 512 * 8);
}

TEST(CountingAllocator, LimitRaisesLibTorchsOutOfMemoryError) {
  ab::CountingCpuAllocator& counter = ab::CountingCpuAllocator::install();
  counter.set_limit_bytes(counter.current_bytes() + (1 << 20));
  at::Tensor fits = torch::empty({1 << 18}, torch::kFloat);  // exactly 1 MiB
  try {
    at::Tensor too_much = torch::empty({16}, torch::kFloat);
    FAIL() << "allocation beyond the limit succeeded";
  } catch (const c10::OutOfMemoryError& error) {
    EXPECT_TRUE(ab::compat::is_out_of_memory(error));
    EXPECT_NE(std::string(error.what()).find("CPU out of memory"), std::string::npos);
  }
  counter.set_limit_bytes(0);
  at::Tensor now_fine = torch::empty({16}, torch::kFloat);
  EXPECT_EQ(now_fine.numel(), 16);
}

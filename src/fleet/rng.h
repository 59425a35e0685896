// A small, fast, seedable random generator (xoshiro256**, seeded by splitmix64) with unbiased
// bounded draws and a Fisher-Yates shuffle, so that a seed gives the same run on every platform
// (std::shuffle and std::uniform_int_distribution are implementation-defined).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace gpumux::fleet {

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (uint64_t& s : state_) {
      seed += 0x9e3779b97f4a7c15ull;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      s = z ^ (z >> 31);
    }
  }

  uint64_t Next() {
    uint64_t result = Rotl(state_[1] * 5, 7) * 9;
    uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = Rotl(state_[3], 45);
    return result;
  }

  // Uniform in [0, n), n > 0 (Lemire's multiply-and-reject).
  uint64_t Below(uint64_t n) {
    __uint128_t m = __uint128_t(Next()) * n;
    uint64_t low = uint64_t(m);
    if (low < n) {
      uint64_t threshold = -n % n;
      while (low < threshold) {
        m = __uint128_t(Next()) * n;
        low = uint64_t(m);
      }
    }
    return uint64_t(m >> 64);
  }

  template <typename T>
  void Shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[Below(i)]);
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t state_[4];
};

}  // namespace gpumux::fleet

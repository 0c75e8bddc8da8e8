// A small deterministic random number generator (splitmix64 + Box-Muller) whose streams are the
// same on every platform, so weights and the built-in corpus are reproducible bit for bit.
#pragma once

#include <cmath>
#include <cstdint>

namespace strata {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}

  // Derives an independent stream, e.g. one per parameter unit.
  static Rng derive(std::uint64_t seed, std::uint64_t stream) {
    Rng mixer(seed ^ (0x9E3779B97F4A7C15ULL * (stream + 1)));
    return Rng(mixer.next_u64());
  }

  std::uint64_t next_u64() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

  // Uniform in [0, 1).
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

  // Uniform integer in [0, n).
  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : next_u64() % n; }

  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u1 = uniform();
    while (u1 <= 0.0) u1 = uniform();
    const double u2 = uniform();
    const double radius = std::sqrt(-2.0 * std::log(u1));
    const double angle = 2.0 * 3.14159265358979323846 * u2;
    spare_ = radius * std::sin(angle);
    has_spare_ = true;
    return radius * std::cos(angle);
  }

 private:
  std::uint64_t state_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

}  // namespace strata

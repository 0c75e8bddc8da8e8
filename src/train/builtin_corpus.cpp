// The built-in corpus generator.
#include "train/builtin_corpus.hpp"

#include <array>
#include <string_view>

#include "core/rng.hpp"

namespace strata {

namespace {

constexpr std::array<std::string_view, 16> kSubjects = {
    "the cat", "a dog", "the old man", "my sister", "the teacher", "a small bird", "the farmer", "our neighbour",
    "the child", "a young fox", "the baker", "my brother", "the doctor", "a tall girl", "the captain", "the king"};
constexpr std::array<std::string_view, 12> kVerbs = {"sees", "likes", "follows", "finds", "carries", "paints",
                                                     "watches", "wants", "holds", "remembers", "builds", "cleans"};
constexpr std::array<std::string_view, 16> kObjects = {
    "the ball", "a red apple", "the river", "a wooden boat", "the letter", "a blue cup", "the old map",
    "a green hat", "the bread", "a silver key", "the garden gate", "a long rope", "the window", "a warm coat",
    "the lamp", "a small box"};
constexpr std::array<std::string_view, 10> kPlaces = {"in the garden", "near the house", "at school", "by the sea",
                                                      "in the kitchen", "on the hill", "under the tree",
                                                      "in the market", "at the station", "behind the barn"};
constexpr std::array<std::string_view, 8> kTimes = {"every morning", "at night", "on sunday", "in the spring",
                                                    "after dinner", "before school", "in winter", "at noon"};
constexpr std::array<std::string_view, 10> kNumbers = {"one", "two", "three", "four", "five",
                                                       "six", "seven", "eight", "nine", "ten"};

template <std::size_t N>
std::string_view pick(Rng& rng, const std::array<std::string_view, N>& words) {
  return words[rng.below(N)];
}

void sentence(Rng& rng, std::string& out) {
  switch (rng.below(5)) {
    case 0:
    case 1: {
      out += pick(rng, kSubjects);
      out += ' ';
      out += pick(rng, kVerbs);
      out += ' ';
      out += pick(rng, kObjects);
      if (rng.below(2) == 0) { out += ' '; out += pick(rng, kPlaces); }
      if (rng.below(3) == 0) { out += ' '; out += pick(rng, kTimes); }
      out += '.';
      break;
    }
    case 2: {
      const auto a = rng.below(20), b = rng.below(20);
      out += std::to_string(a) + " plus " + std::to_string(b) + " is " + std::to_string(a + b) + '.';
      break;
    }
    case 3: {
      const auto start = rng.below(6), len = 3 + rng.below(5);
      for (std::uint64_t i = 0; i < len && start + i < kNumbers.size(); ++i) {
        if (i) out += ", ";
        out += kNumbers[start + i];
      }
      out += '.';
      break;
    }
    default: {
      const std::string_view object = pick(rng, kObjects);
      const std::string_view place = pick(rng, kPlaces);
      out += "where is ";
      out += object;
      out += "? ";
      out += object;
      out += " is ";
      out += place;
      out += '.';
      break;
    }
  }
}

}  // namespace

std::string builtin_corpus(std::size_t bytes, std::uint64_t seed) {
  Rng rng(seed);
  std::string out;
  out.reserve(bytes + 256);
  while (out.size() < bytes) {
    const auto sentences = 3 + rng.below(4);
    for (std::uint64_t s = 0; s < sentences && out.size() < bytes; ++s) {
      if (s) out += ' ';
      sentence(rng, out);
    }
    out += '\n';
  }
  return out;
}

}  // namespace strata

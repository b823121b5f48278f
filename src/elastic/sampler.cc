// ElasticSampler. The invariant behind exactly-once: at any moment the
// processed samples of the job are processed_ (as of the last reset) plus,
// for every worker r, the first cursor_ samples of its shard. Every worker
// can compute that set alone because the shards are a function of
// (remaining_, size_), which all workers share after a reset. serialize()
// materialises it, so a commit made by any worker holds the whole job's
// progress, and a rollback to it re-partitions exactly what is left.
#include <algorithm>
#include <charconv>
#include <cstring>

#include "edt/elastic.h"

namespace edt::elastic {
namespace {

// splitmix64: a small, well-mixed generator with a fixed definition, so the
// permutation is the same everywhere.
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [0, bound), without modulo bias (rejection of the short tail).
uint64_t uniform_below(uint64_t& state, uint64_t bound) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  uint64_t x;
  do x = splitmix64(state);
  while (x >= limit);
  return x % bound;
}

constexpr std::string_view kMagic = "edt-elastic-sampler v1";

}  // namespace

std::vector<uint64_t> epoch_permutation(uint64_t n, uint64_t seed, uint64_t epoch) {
  std::vector<uint64_t> perm(n);
  for (uint64_t i = 0; i < n; ++i) perm[i] = i;
  uint64_t state = seed ^ (epoch * 0xD1B54A32D192ED03ull);
  splitmix64(state);
  for (uint64_t i = n; i > 1; --i) std::swap(perm[i - 1], perm[uniform_below(state, i)]);
  return perm;
}

ElasticSampler::ElasticSampler(const ElasticSamplerOptions& options) : options_(options) { start_epoch(0); }

void ElasticSampler::set_epoch(uint64_t epoch) {
  if (epoch != epoch_) start_epoch(epoch);
}

void ElasticSampler::start_epoch(uint64_t epoch) {
  epoch_ = epoch;
  if (options_.shuffle) {
    permutation_ = epoch_permutation(options_.num_samples, options_.seed, epoch);
  } else {
    permutation_.resize(options_.num_samples);
    for (uint64_t i = 0; i < options_.num_samples; ++i) permutation_[i] = i;
  }
  processed_.assign(options_.num_samples, false);
  repartition();
}

void ElasticSampler::reset(int rank, int size) {
  EDT_CHECK_MSG(size > 0 && rank >= 0 && rank < size,
                "ElasticSampler::reset(rank=" + std::to_string(rank) + ", size=" + std::to_string(size) + ")");
  processed_ = processed_now();
  rank_ = rank;
  size_ = size;
  repartition();
}

void ElasticSampler::repartition() {
  remaining_.clear();
  for (uint64_t index : permutation_)
    if (!processed_[index]) remaining_.push_back(index);
  cursor_ = 0;
}

uint64_t ElasticSampler::shard_size(int rank) const {
  const uint64_t n = remaining_.size(), r = static_cast<uint64_t>(rank), s = static_cast<uint64_t>(size_);
  return r < n ? (n - r + s - 1) / s : 0;
}

std::vector<uint64_t> ElasticSampler::batch(uint64_t batch_size) const {
  std::vector<uint64_t> out;
  const uint64_t end = std::min(shard_size(rank_), cursor_ + batch_size);
  for (uint64_t i = cursor_; i < end; ++i) out.push_back(remaining_[i * size_ + rank_]);
  return out;
}

void ElasticSampler::record_batch(uint64_t batch_size) {
  cursor_ = std::min(cursor_ + batch_size, shard_size(0));
}

uint64_t ElasticSampler::steps_left(uint64_t batch_size) const {
  EDT_CHECK(batch_size > 0);
  const uint64_t left = shard_size(0) - cursor_;
  return (left + batch_size - 1) / batch_size;
}

uint64_t ElasticSampler::processed_count() const {
  // remaining_[i] belongs to worker i % size_ at position i / size_ of its
  // shard, so the first cursor_ * size_ entries of remaining_ are processed.
  const uint64_t done_now = std::min<uint64_t>(cursor_ * size_, remaining_.size());
  return options_.num_samples - remaining_.size() + done_now;
}

std::vector<uint64_t> ElasticSampler::shard() const {
  std::vector<uint64_t> out;
  for (uint64_t i = rank_; i < remaining_.size(); i += size_) out.push_back(remaining_[i]);
  return out;
}

std::vector<bool> ElasticSampler::processed_now() const {
  std::vector<bool> done = processed_;
  const uint64_t done_now = std::min<uint64_t>(cursor_ * size_, remaining_.size());
  for (uint64_t i = 0; i < done_now; ++i) done[remaining_[i]] = true;
  return done;
}

// Format: "edt-elastic-sampler v1 <num_samples> <seed> <shuffle> <epoch>\n"
// followed by the processed bitmap, one bit per sample, little-endian bits.
std::string ElasticSampler::serialize() const {
  std::string out(kMagic);
  out += " " + std::to_string(options_.num_samples) + " " + std::to_string(options_.seed) + " " +
         (options_.shuffle ? "1" : "0") + " " + std::to_string(epoch_) + "\n";
  const std::vector<bool> done = processed_now();
  std::string bits((options_.num_samples + 7) / 8, '\0');
  for (uint64_t i = 0; i < options_.num_samples; ++i)
    if (done[i]) bits[i / 8] = static_cast<char>(bits[i / 8] | (1 << (i % 8)));
  return out + bits;
}

Status ElasticSampler::deserialize(std::string_view bytes) {
  auto bad = [](const std::string& why) {
    return invalid_argument("ElasticSampler state: " + why + "; pass bytes made by ElasticSampler::serialize()");
  };
  const size_t eol = bytes.find('\n');
  if (bytes.substr(0, kMagic.size()) != kMagic || eol == std::string_view::npos)
    return bad("does not start with '" + std::string(kMagic) + "'");
  uint64_t fields[4];
  const char* p = bytes.data() + kMagic.size();
  const char* header_end = bytes.data() + eol;
  for (uint64_t& field : fields) {
    if (p >= header_end || *p != ' ') return bad("malformed header");
    auto [next, ec] = std::from_chars(p + 1, header_end, field);
    if (ec != std::errc()) return bad("malformed header");
    p = next;
  }
  if (p != header_end) return bad("malformed header");
  const auto [num_samples, seed, shuffle, epoch] = fields;
  if (num_samples != options_.num_samples || seed != options_.seed || (shuffle != 0) != options_.shuffle)
    return bad("made for num_samples=" + std::to_string(num_samples) + " seed=" + std::to_string(seed) +
               " shuffle=" + std::to_string(shuffle) + ", this sampler has num_samples=" +
               std::to_string(options_.num_samples) + " seed=" + std::to_string(options_.seed) +
               " shuffle=" + (options_.shuffle ? "1" : "0"));
  const std::string_view bits = bytes.substr(eol + 1);
  if (bits.size() != (num_samples + 7) / 8)
    return bad("bitmap of " + std::to_string(bits.size()) + " bytes, expected " +
               std::to_string((num_samples + 7) / 8));
  if (epoch != epoch_) start_epoch(epoch);
  for (uint64_t i = 0; i < num_samples; ++i) processed_[i] = (bits[i / 8] >> (i % 8)) & 1;
  repartition();
  return Status::ok();
}

}  // namespace edt::elastic

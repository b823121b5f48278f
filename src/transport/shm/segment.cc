#include "transport/shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

namespace edt::transport::shm {
namespace {

constexpr uint64_t kMagic = 0x6564742d73686d31ull;  // "edt-shm1"

size_t ring_bytes_for(int local_size) { return local_size <= 4 ? (256u << 10) : (128u << 10); }
// Big chunks mean few synchronisations (each one costs a scheduling delay
// when ranks share cores); all of a host's slots together stay within a
// part of the last-level cache.
size_t slot_bytes_for(int local_size) { return std::max<size_t>(256u << 10, (4u << 20) / size_t(local_size)); }

size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

struct Layout {
  size_t rings_offset, slots_offset, total;
};

Layout layout(int local_size, size_t header_and_control) {
  const size_t n = static_cast<size_t>(local_size);
  const size_t ring_stride = 2 * kCacheLine + ring_bytes_for(local_size);
  Layout l;
  l.rings_offset = align_up(header_and_control, 4096);
  l.slots_offset = align_up(l.rings_offset + n * n * ring_stride, 4096);
  l.total = l.slots_offset + n * kSlotBuffers * slot_bytes_for(local_size);
  return l;
}

std::string unique_name() {
  std::random_device rd;
  std::ostringstream name;
  name << "/edt-" << ::getpid() << "-" << std::hex << rd() << rd();
  return name.str();
}

}  // namespace

Segment::Segment(uint8_t* base, size_t bytes, int local_size)
    : base_(base), bytes_(bytes), local_size_(local_size) {
  ring_bytes_ = ring_bytes_for(local_size);
  slot_bytes_ = slot_bytes_for(local_size);
  Layout l = layout(local_size, sizeof(Header) + size_t(local_size) * sizeof(Control));
  rings_offset_ = l.rings_offset;
  slots_offset_ = l.slots_offset;
}

Segment::~Segment() { ::munmap(base_, bytes_); }

Result<std::shared_ptr<Segment>> Segment::create(Store& store, const Options& options) {
  const int n = options.local_size;
  const size_t bytes = layout(n, sizeof(Header) + size_t(n) * sizeof(Control)).total;
  auto timeout_left = [&] {
    return std::max(std::chrono::duration_cast<Store::Duration>(options.deadline - Clock::now()), Store::Duration(1));
  };
  std::string name;
  int fd = -1;
  if (options.local_rank == 0) {
    name = unique_name();
    fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) return io_error("shm_open " + name + " (is /dev/shm mounted and writable?)", errno);
    if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      int err = errno;
      ::close(fd);
      ::shm_unlink(name.c_str());
      return io_error("sizing shared memory " + name + " to " + std::to_string(bytes) +
                          " bytes (is /dev/shm big enough? containers need --shm-size)",
                      err);
    }
  } else {
    EDT_ASSIGN_OR_RETURN(name, store.get(options.key + "/name", timeout_left()));
    fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0)
      return io_error("opening shared memory " + name +
                          " of the local leader (are ranks with one host identity really on one host?)",
                      errno);
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) {
    if (options.local_rank == 0) ::shm_unlink(name.c_str());
    return io_error("mapping shared memory " + name, err);
  }
  std::shared_ptr<Segment> segment(new Segment(static_cast<uint8_t*>(p), bytes, n));
  if (options.local_rank == 0) {
    Header* h = segment->header();
    h->magic = kMagic;
    h->local_size = static_cast<uint32_t>(n);
    h->broken_by.store(-1);
    Status s = store.set(options.key + "/name", name);
    // Unlink once everyone has it mapped: from then on the memory lives
    // exactly as long as the mappings.
    std::vector<std::string> mapped;
    for (int i = 1; i < n; ++i) mapped.push_back(options.key + "/mapped/" + std::to_string(i));
    if (s.is_ok()) s = store.wait(mapped, timeout_left());
    ::shm_unlink(name.c_str());
    EDT_RETURN_IF_ERROR(s);
  } else {
    if (segment->header()->magic != kMagic || segment->header()->local_size != uint32_t(n))
      return internal_error("shared memory " + name + " does not hold an edt segment for " + std::to_string(n) +
                            " local ranks");
    EDT_RETURN_IF_ERROR(store.set(options.key + "/mapped/" + std::to_string(options.local_rank), "1"));
  }
  return segment;
}

Segment::Ring Segment::ring(int from, int to) {
  const size_t stride = 2 * kCacheLine + ring_bytes_;
  uint8_t* at = base_ + rings_offset_ + (size_t(from) * size_t(local_size_) + size_t(to)) * stride;
  auto* rh = reinterpret_cast<RingHeader*>(at);
  return Ring{&rh->head.value, &rh->tail.value, at + 2 * kCacheLine, ring_bytes_};
}

void Segment::mark_broken(int rank) {
  int32_t none = -1;
  header()->broken_by.compare_exchange_strong(none, rank);
  for (int i = 0; i < local_size_; ++i) doorbell(i).ring();
}

int Segment::broken_by() const { return header()->broken_by.load(std::memory_order_acquire); }

uint64_t process_start_time(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The command name (field 2) may hold spaces; fields after it follow ')'.
  auto close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(stat.substr(close + 2));
  std::string field;
  // Field 3 is the state; the start time is field 22.
  for (int i = 3; i <= 22 && rest >> field; ++i)
    if (i == 22) return std::stoull(field);
  return 0;
}

Status check_process(int pid, uint64_t start_time, const std::string& who) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto close = stat.rfind(')');
  bool alive = close != std::string::npos && close + 2 < stat.size();
  if (alive) {
    char state = stat[close + 2];
    alive = state != 'Z' && state != 'X' && process_start_time(pid) == start_time;
  }
  if (alive) return Status::ok();
  return peer_failed(who + " died mid-collective (process " + std::to_string(pid) +
                     " is gone); the job must re-form without it");
}

namespace {

class ShmChannel final : public Channel {
 public:
  ShmChannel(std::shared_ptr<Segment> segment, int me, int other, std::string peer, int pid, uint64_t start,
             int my_rank)
      : segment_(std::move(segment)),
        out_(segment_->ring(me, other)),
        in_(segment_->ring(other, me)),
        other_bell_(&segment_->doorbell(other)),
        peer_(std::move(peer)),
        pid_(pid),
        start_(start),
        my_rank_(my_rank) {}

  Result<size_t> try_send(const uint8_t* data, size_t n) override {
    const uint64_t head = out_.head->load(std::memory_order_relaxed);
    const uint64_t tail = out_.tail->load(std::memory_order_acquire);
    n = std::min<size_t>(n, out_.capacity - (head - tail));
    if (n == 0) return size_t{0};
    const size_t at = head & (out_.capacity - 1);
    const size_t first = std::min(n, out_.capacity - at);
    std::memcpy(out_.data + at, data, first);
    std::memcpy(out_.data, data + first, n - first);
    out_.head->store(head + n, std::memory_order_release);
    other_bell_->ring();
    return n;
  }

  Result<std::span<const uint8_t>> peek() override {
    const uint64_t tail = in_.tail->load(std::memory_order_relaxed);
    const uint64_t head = in_.head->load(std::memory_order_acquire);
    const size_t at = tail & (in_.capacity - 1);
    const size_t n = std::min<size_t>(head - tail, in_.capacity - at);
    return std::span<const uint8_t>(in_.data + at, n);
  }

  void consume(size_t n) override {
    in_.tail->store(in_.tail->load(std::memory_order_relaxed) + n, std::memory_order_release);
    other_bell_->ring();
  }

  Status check_peer() override {
    int by = segment_->broken_by();
    if (by >= 0 && by != my_rank_)
      return peer_failed("rank " + std::to_string(by) + " on this host failed or aborted mid-collective");
    return check_process(pid_, start_, peer_);
  }

  void poison() override { segment_->mark_broken(my_rank_); }

 private:
  std::shared_ptr<Segment> segment_;
  Segment::Ring out_, in_;
  Doorbell* other_bell_;  // the peer's: it may wait for data or room
  std::string peer_;
  int pid_;
  uint64_t start_;
  int my_rank_;
};

}  // namespace

std::unique_ptr<Channel> make_channel(std::shared_ptr<Segment> segment, int me, int other, std::string peer,
                                      int peer_pid, uint64_t peer_start, int my_rank) {
  return std::make_unique<ShmChannel>(std::move(segment), me, other, std::move(peer), peer_pid, peer_start,
                                      my_rank);
}

}  // namespace edt::transport::shm

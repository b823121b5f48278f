#include "transport/shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
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

}  // namespace edt::transport::shm

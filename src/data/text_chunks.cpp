// Chunked, parallel, order-preserving processing of input files; see text_chunks.h.
// The reader (the calling thread) keeps at most 2 x threads chunks in flight.
#include "data/text_chunks.h"

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "data/pretokenize.h"

namespace tera {

namespace fs = std::filesystem;

Expected<std::vector<std::string>> list_input_files(const std::vector<std::string>& inputs) {
  std::vector<std::string> out;
  for (const auto& in : inputs) {
    std::error_code ec;
    if (fs::is_regular_file(in, ec)) {
      out.push_back(in);
    } else if (fs::is_directory(in, ec)) {
      std::vector<std::string> found;
      fs::recursive_directory_iterator it(in, fs::directory_options::skip_permission_denied, ec), end;
      for (; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (!name.empty() && name[0] == '.') {
          if (it->is_directory(ec)) it.disable_recursion_pending();
          continue;
        }
        if (it->is_regular_file(ec)) found.push_back(it->path().string());
      }
      if (ec) return Status::error(in + ": cannot list the directory (" + ec.message() + ")");
      std::sort(found.begin(), found.end());
      out.insert(out.end(), found.begin(), found.end());
    } else if (fs::exists(in, ec)) {
      return Status::error(in + ": is not a regular file or a directory (a device or FIFO); name text files");
    } else {
      return Status::error(in + ": no such file or directory");
    }
  }
  return out;
}

namespace {

class File {
 public:
  explicit File(const std::string& path) : path_(path), f_(std::fopen(path.c_str(), "rb")) {}
  ~File() {
    if (f_ != nullptr) std::fclose(f_);
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  Status opened() const {
    return f_ != nullptr ? ok_status() : Status::error(path_ + ": cannot open (" + std::strerror(errno) + ")");
  }
  // Appends up to n bytes read at offset to out.
  Status read_at(int64_t offset, size_t n, std::string& out) {
    if (std::fseek(f_, offset, SEEK_SET) != 0) return Status::error(path_ + ": seek failed");
    const size_t old = out.size();
    out.resize(old + n);
    const size_t got = std::fread(out.data() + old, 1, n, f_);
    out.resize(old + got);
    if (std::ferror(f_) != 0) return Status::error(path_ + ": read error (" + std::strerror(errno) + ")");
    return ok_status();
  }

 private:
  std::string path_;
  std::FILE* f_;
};

bool is_utf8_continuation(char c) { return (static_cast<uint8_t>(c) & 0xC0) == 0x80; }

// Where the held-out tail starts: the first safe boundary (pretokenize.h)
// at or after target that leaves at least half the tail asked for; else
// (text with no ASCII spaces: CJK, emoji, NUL-separated records) the first
// UTF-8 character boundary at or after target, or the last one before it.
// Never size when target < size: a fraction that asks for data gets some.
Expected<int64_t> find_hold_out(File& f, int64_t size, int64_t target) {
  if (target <= 0) return int64_t{0};
  if (target >= size) return size;
  const int64_t limit = target + std::max<int64_t>(1, (size - target) / 2);  // the latest safe cut taken
  for (int64_t at = target - 1; at < limit; at += 1 << 16) {
    std::string buf;
    TERA_RETURN_IF_ERROR(f.read_at(at, (1 << 16) + 1, buf));
    const size_t p = find_safe_split(buf, 1);
    if (p != std::string::npos && at + static_cast<int64_t>(p) < limit) return at + static_cast<int64_t>(p);
    if (static_cast<int64_t>(buf.size()) < (1 << 16) + 1) break;
  }
  // A UTF-8 sequence is at most 4 bytes: its start is within 3 bytes of target.
  const int64_t from = std::max<int64_t>(0, target - 3);
  std::string near;
  TERA_RETURN_IF_ERROR(f.read_at(from, static_cast<size_t>(std::min<int64_t>(size - from, 8)), near));
  for (int64_t at = target; at < from + static_cast<int64_t>(near.size()); ++at) {
    if (!is_utf8_continuation(near[static_cast<size_t>(at - from)])) return at;
  }
  for (int64_t at = target - 1; at > from; --at) {
    if (!is_utf8_continuation(near[static_cast<size_t>(at - from)])) return at;
  }
  return target;  // not UTF-8 there: any byte will do
}

// Worker pool delivering results in submission order.
class Pipeline {
 public:
  Pipeline(int threads, const ChunkWork& work) : work_(work) {
    for (int t = 0; t < threads; ++t) pool_.emplace_back([this, t] { loop(t); });
  }
  ~Pipeline() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : pool_) t.join();
  }
  void submit(std::unique_ptr<TextChunk> c) {
    std::lock_guard<std::mutex> l(mu_);
    todo_.emplace_back(submitted_++, std::move(c));
    cv_.notify_all();
  }
  int64_t in_flight() const { return submitted_ - taken_; }
  // The next chunk in order, waiting for it.
  std::unique_ptr<TextChunk> take() {
    std::unique_lock<std::mutex> l(mu_);
    done_cv_.wait(l, [&] { return done_.count(taken_) > 0; });
    auto c = std::move(done_[taken_]);
    done_.erase(taken_++);
    return c;
  }

 private:
  void loop(int t) {
    for (;;) {
      std::pair<int64_t, std::unique_ptr<TextChunk>> job;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return stop_ || !todo_.empty(); });
        if (todo_.empty()) return;
        job = std::move(todo_.front());
        todo_.pop_front();
      }
      work_(*job.second, t);
      {
        std::lock_guard<std::mutex> l(mu_);
        done_[job.first] = std::move(job.second);
      }
      done_cv_.notify_all();
    }
  }
  const ChunkWork& work_;
  std::vector<std::thread> pool_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::deque<std::pair<int64_t, std::unique_ptr<TextChunk>>> todo_;
  std::map<int64_t, std::unique_ptr<TextChunk>> done_;
  int64_t submitted_ = 0, taken_ = 0;
  bool stop_ = false;
};

}  // namespace

Status process_text_chunks(const std::vector<std::string>& files, const ChunkOptions& opts, const ChunkWork& work,
                           const ChunkConsume& consume, const ByteProgress& progress) {
  int64_t total = 0, done = 0;
  std::vector<int64_t> sizes;
  for (const auto& p : files) {
    std::error_code ec;
    const auto n = fs::file_size(p, ec);
    if (ec) return Status::error(p + ": cannot read its size (" + ec.message() + ")");
    sizes.push_back(static_cast<int64_t>(n));
    total += static_cast<int64_t>(n);
  }
  const int threads = std::max(1, opts.threads);
  std::unique_ptr<Pipeline> pipe;
  if (threads > 1) pipe = std::make_unique<Pipeline>(threads, work);
  Status result;  // the first failure
  auto finish = [&](TextChunk& c) {
    if (result.is_ok()) result = consume(c);
    done += static_cast<int64_t>(c.text.size());
    if (progress && result.is_ok()) progress(done, total);
  };
  auto emit = [&](std::unique_ptr<TextChunk> c) {
    if (!pipe) {
      work(*c, 0);
      finish(*c);
      return;
    }
    pipe->submit(std::move(c));
    while (pipe->in_flight() >= 2 * threads) finish(*pipe->take());
  };
  const size_t step = std::max<size_t>(opts.chunk_bytes, 64);
  for (size_t fi = 0; fi < files.size() && result.is_ok(); ++fi) {
    File f(files[fi]);
    if (Status s = f.opened(); !s) return s;
    const int64_t size = sizes[fi];
    int64_t split = size;
    if (opts.hold_out > 0) {
      auto h = find_hold_out(f, size, static_cast<int64_t>(static_cast<double>(size) * (1.0 - opts.hold_out)));
      if (!h) return h.status();
      split = *h;
    }
    const int64_t bounds[3] = {0, split, size};
    for (int part = 0; part < 2 && result.is_ok(); ++part) {
      int64_t pos = bounds[part], carry_at = pos;
      const int64_t end = bounds[part + 1];
      std::string carry;
      while (pos < end && result.is_ok()) {
        const auto n = static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(step), end - pos));
        const size_t before = carry.size();
        if (Status s = f.read_at(pos, n, carry); !s) return s;
        if (carry.size() - before != n) return Status::error(files[fi] + ": the file shrank while being read");
        pos += static_cast<int64_t>(n);
        // Only the bytes just read can hold a new boundary (the rest had none), so a file without any
        // boundary costs linear time, not quadratic.
        const size_t cut = pos == end              ? carry.size()
                           : !opts.split_at_spaces ? std::string::npos
                                                   : rfind_safe_split(carry, carry.size() - 1, std::max<size_t>(before, 1));
        if (cut == std::string::npos) continue;  // no boundary yet: read on
        auto c = std::make_unique<TextChunk>();
        c->file = fi;
        c->part = part;
        c->offset = carry_at;
        c->last = pos == end;
        c->text = carry.substr(0, cut);
        carry.erase(0, cut);
        carry_at += static_cast<int64_t>(cut);
        emit(std::move(c));
      }
    }
  }
  while (pipe && pipe->in_flight() > 0) finish(*pipe->take());
  return result;
}

}  // namespace tera

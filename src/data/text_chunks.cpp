// Chunked, parallel, order-preserving processing of input files; see text_chunks.h.
// The reader (the calling thread) keeps at most 2 x threads batches in flight,
// each about chunk_bytes (or one chunk or JSONL line longer than that).
#include "data/text_chunks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "data/byte_source.h"
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

// A unit of work: text chunks, or JSONL lines the worker parses into chunks.
// Batching many small documents keeps the per-job cost of the pool (locks,
// wake-ups) small next to the work.
struct Batch {
  std::vector<TextChunk> chunks;
  size_t file = 0;           // of the lines
  std::string lines;         // JSONL lines, back to back, without their line ends
  std::vector<size_t> ends;  // where each line ends in lines
  int64_t first_line = 0;    // the 1-based number of the first of them
  std::vector<std::pair<int64_t, std::string>> bad;  // (line, what is wrong), in line order
  int64_t input_bytes = 0;   // of the input files (as stored), for progress
  size_t text_bytes = 0;     // of the chunks added by the reader
};

// Line n (1-based) of a JSONL file is held out when floor(n f) > floor((n - 1) f).
bool held_out_line(int64_t n, double f) {
  return f > 0 && std::floor(static_cast<double>(n) * f) > std::floor(static_cast<double>(n - 1) * f);
}

// Turns the batch's JSONL lines into document chunks (one per key with a
// non-empty value) and notes the malformed ones.
void parse_lines(Batch& b, const ChunkOptions& o) {
  std::vector<JsonlDocument> docs;
  size_t begin = 0;
  for (size_t i = 0; i < b.ends.size(); ++i) {
    const int64_t number = b.first_line + static_cast<int64_t>(i);
    std::string why = parse_jsonl_line(std::string_view(b.lines).substr(begin, b.ends[i] - begin), o.jsonl.keys, docs);
    begin = b.ends[i];
    if (!why.empty()) {
      b.bad.emplace_back(number, std::move(why));
      continue;
    }
    for (JsonlDocument& d : docs) {
      TextChunk& c = b.chunks.emplace_back();
      c.file = b.file;
      c.part = held_out_line(number, o.hold_out) ? 1 : 0;
      c.last = true;
      c.key = d.key;
      c.line = number;
      c.text = std::move(d.text);
    }
  }
  std::string().swap(b.lines);
  b.ends.clear();
}

using BatchWork = std::function<void(Batch&, int thread)>;

// Worker pool delivering results in submission order.
class Pipeline {
 public:
  Pipeline(int threads, BatchWork work) : work_(std::move(work)) {
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
  void submit(std::unique_ptr<Batch> b) {
    std::lock_guard<std::mutex> l(mu_);
    todo_.emplace_back(submitted_++, std::move(b));
    cv_.notify_all();
  }
  int64_t in_flight() const { return submitted_ - taken_; }
  // The next batch in order, waiting for it.
  std::unique_ptr<Batch> take() {
    std::unique_lock<std::mutex> l(mu_);
    done_cv_.wait(l, [&] { return done_.count(taken_) > 0; });
    auto b = std::move(done_[taken_]);
    done_.erase(taken_++);
    return b;
  }

 private:
  void loop(int t) {
    for (;;) {
      std::pair<int64_t, std::unique_ptr<Batch>> job;
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
  BatchWork work_;
  std::vector<std::thread> pool_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::deque<std::pair<int64_t, std::unique_ptr<Batch>>> todo_;
  std::map<int64_t, std::unique_ptr<Batch>> done_;
  int64_t submitted_ = 0, taken_ = 0;
  bool stop_ = false;
};

// The reader's side: batches go to the pool (or run inline with one thread);
// finished ones are consumed in order, malformed lines reported between the
// documents around them. At most 2 x threads batches are in flight.
class BatchRunner {
 public:
  BatchRunner(const std::vector<std::string>& files, const ChunkOptions& o, const ChunkWork& work,
              const ChunkConsume& consume, const ByteProgress& progress, int64_t total)
      : files_(files), o_(o), consume_(consume), progress_(progress), total_(total), threads_(std::max(1, o.threads)) {
    work_ = [this, &work](Batch& b, int thread) {
      if (!b.ends.empty()) parse_lines(b, o_);
      for (TextChunk& c : b.chunks) work(c, thread);
    };
    if (threads_ > 1) pipe_ = std::make_unique<Pipeline>(threads_, work_);
  }
  bool ok() const { return result_.is_ok(); }
  const Status& result() const { return result_; }
  ChunkReport& report() { return report_; }

  // A text chunk: batched until the batch holds about chunk_bytes.
  void add_chunk(std::unique_ptr<TextChunk> c, size_t step) {
    if (!text_) text_ = std::make_unique<Batch>();
    text_->input_bytes += static_cast<int64_t>(c->text.size());
    text_->text_bytes += c->text.size();
    text_->chunks.push_back(std::move(*c));
    if (text_->text_bytes >= step) flush_text();
  }
  void flush_text() {
    if (text_) submit(std::move(text_));
  }
  void submit(std::unique_ptr<Batch> b) {
    if (!pipe_) {
      work_(*b, 0);
      finish(*b);
      return;
    }
    pipe_->submit(std::move(b));
    while (pipe_->in_flight() >= 2 * threads_) finish(*pipe_->take());
  }
  void drain() {
    flush_text();
    while (pipe_ && pipe_->in_flight() > 0) finish(*pipe_->take());
  }

 private:
  void finish(Batch& b) {
    size_t bad = 0;
    for (TextChunk& c : b.chunks) {
      while (bad < b.bad.size() && b.bad[bad].first < c.line) note_bad(b, bad++);
      if (result_.is_ok()) result_ = consume_(c);
    }
    while (bad < b.bad.size()) note_bad(b, bad++);
    done_ += b.input_bytes;
    if (progress_ && result_.is_ok()) progress_(done_, total_);
  }
  void note_bad(const Batch& b, size_t i) {
    if (!result_.is_ok()) return;
    const std::string what = fmt::format("{}:{}: {}", files_[b.file], b.bad[i].first, b.bad[i].second);
    if (!o_.jsonl.skip_bad_lines) {
      result_ = Status::error(what + "; fix the line, or pass --skip-bad-lines to skip malformed lines (they are "
                                     "counted and the first is named)");
      return;
    }
    if (report_.bad_lines++ == 0) report_.first_bad = what;
  }

  const std::vector<std::string>& files_;
  const ChunkOptions& o_;
  const ChunkConsume& consume_;
  const ByteProgress& progress_;
  int64_t total_, done_ = 0;
  int threads_;
  BatchWork work_;
  std::unique_ptr<Pipeline> pipe_;
  std::unique_ptr<Batch> text_;
  Status result_;  // the first failure
  ChunkReport report_;
};

// One text file: chunks of about step bytes cut at safe boundaries, the held-out tail as part 1.
Status chunk_text_file(size_t fi, const std::string& path, int64_t size, const ChunkOptions& opts, size_t step,
                       BatchRunner& run) {
  File f(path);
  TERA_RETURN_IF_ERROR(f.opened());
  std::string head;
  TERA_RETURN_IF_ERROR(f.read_at(0, 2, head));
  if (has_gzip_magic(head)) {
    return Status::error(path + ": is gzip-compressed; tera reads gzip only as JSONL (name it .jsonl.gz, or pass "
                                "--input-format jsonl); gunzip a text file first");
  }
  int64_t split = size;
  if (opts.hold_out > 0) {
    auto h = find_hold_out(f, size, static_cast<int64_t>(static_cast<double>(size) * (1.0 - opts.hold_out)));
    if (!h) return h.status();
    split = *h;
  }
  const int64_t bounds[3] = {0, split, size};
  for (int part = 0; part < 2 && run.ok(); ++part) {
    int64_t pos = bounds[part], carry_at = pos;
    const int64_t end = bounds[part + 1];
    std::string carry;
    while (pos < end && run.ok()) {
      const auto n = static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(step), end - pos));
      const size_t before = carry.size();
      TERA_RETURN_IF_ERROR(f.read_at(pos, n, carry));
      if (carry.size() - before != n) return Status::error(path + ": the file shrank while being read");
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
      run.add_chunk(std::move(c), step);
    }
  }
  return ok_status();
}

// One JSONL file: batches of about step bytes of lines, parsed on the workers.
Status chunk_jsonl_file(size_t fi, const std::string& path, const ChunkOptions& opts, size_t step, BatchRunner& run) {
  run.flush_text();  // keep the order: text chunks before these lines
  auto src = open_byte_source(path);
  if (!src) return src.status();
  LineReader reader(std::move(*src), path, opts.jsonl.max_line_bytes);
  int64_t raw_at = 0;
  auto b = std::make_unique<Batch>();
  while (run.ok()) {
    auto more = reader.next();
    if (!more) return more.status();
    if (*more) {
      if (b->ends.empty()) b->first_line = reader.line_number();
      b->lines.append(reader.line());
      b->ends.push_back(b->lines.size());
    }
    if (!*more || b->lines.size() >= step) {
      b->file = fi;
      b->input_bytes = reader.raw_bytes() - raw_at;
      raw_at = reader.raw_bytes();
      run.submit(std::move(b));
      if (!*more) break;
      b = std::make_unique<Batch>();
    }
  }
  run.report().jsonl_lines += reader.line_number();
  return ok_status();
}

}  // namespace

Expected<ChunkReport> process_text_chunks(const std::vector<std::string>& files, const ChunkOptions& opts,
                                          const ChunkWork& work, const ChunkConsume& consume,
                                          const ByteProgress& progress) {
  if (opts.jsonl.format != InputFormat::kText) TERA_RETURN_IF_ERROR(check_json_keys(opts.jsonl.keys));
  int64_t total = 0;
  std::vector<int64_t> sizes;
  for (const auto& p : files) {
    std::error_code ec;
    const auto n = fs::file_size(p, ec);
    if (ec) return Status::error(p + ": cannot read its size (" + ec.message() + ")");
    sizes.push_back(static_cast<int64_t>(n));
    total += static_cast<int64_t>(n);
  }
  const size_t step = std::max<size_t>(opts.chunk_bytes, 64);
  BatchRunner run(files, opts, work, consume, progress, total);
  for (size_t fi = 0; fi < files.size() && run.ok(); ++fi) {
    const Status s = is_jsonl_input(files[fi], opts.jsonl.format)
                         ? chunk_jsonl_file(fi, files[fi], opts, step, run)
                         : chunk_text_file(fi, files[fi], sizes[fi], opts, step, run);
    if (!s) {
      // A malformed line before the read error, still in flight, is the first failure.
      run.drain();
      return run.ok() ? s : run.result();
    }
  }
  run.drain();
  if (!run.ok()) return run.result();
  return run.report();
}

}  // namespace tera

// AtomicFile (a process that dies before commit leaves the old bytes and no
// partial file in their place; commit replaces atomically) and the checked
// path helpers of core/file_util.h.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>
#include <fstream>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "temp_dir_test.h"

namespace tera {
namespace {

namespace fs = std::filesystem;

class FileUtil : public TempDirTest {
 protected:
  static void write_text(const std::string& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }
  static std::string read_text(const std::string& p) {
    auto bytes = read_file(p);
    EXPECT_TRUE(bytes.ok()) << bytes.error();
    return bytes.ok() ? std::string(bytes->begin(), bytes->end()) : std::string();
  }
  // Names in the directory other than `keep`.
  std::vector<std::string> others(const std::string& keep) const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.path().filename() != keep) out.push_back(e.path().filename().string());
    }
    return out;
  }
};

TEST_F(FileUtil, CommitReplacesTheTargetAndLeavesNoTemporary) {
  const std::string target = path("meta.json");
  write_text(target, "old bytes");
  auto f = AtomicFile::create(target);
  ASSERT_TRUE(f.ok()) << f.error();
  const std::string text = "new contents, longer than the old";
  ASSERT_TRUE(f->write(text.data(), text.size()).is_ok());
  EXPECT_EQ(read_text(target), "old bytes");  // nothing visible before commit
  ASSERT_TRUE(f->commit().is_ok());
  EXPECT_EQ(read_text(target), text);
  EXPECT_EQ(f->bytes_written(), text.size());
  EXPECT_EQ(f->crc32(), crc32_of(text.data(), text.size()));
  EXPECT_TRUE(others("meta.json").empty());
}

TEST_F(FileUtil, AbandonedFileKeepsTheOldBytes) {
  const std::string target = path("latest");
  write_text(target, "step-00000004\n");
  {
    auto f = AtomicFile::create(target);
    ASSERT_TRUE(f.ok()) << f.error();
    ASSERT_TRUE(f->write("step-00000008\n", 14).is_ok());
  }  // destroyed without commit
  EXPECT_EQ(read_text(target), "step-00000004\n");
  EXPECT_TRUE(others("latest").empty());
}

// The process dies (no destructors, no atexit) after writing and before the
// rename: the target still holds its old bytes, whole; what is left beside it
// is only the writer's own temporary, never the target's name.
TEST_F(FileUtil, ProcessDyingBeforeRenameLeavesTheOldFile) {
  const std::string target = path("model.safetensors");
  const std::string old(1 << 16, 'o');
  write_text(target, old);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto f = AtomicFile::create(target);
    if (!f.ok()) ::_exit(3);
    const std::string partial(1 << 20, 'n');
    if (!f->write(partial.data(), partial.size()).is_ok()) ::_exit(4);
    ::_exit(0);  // dies before commit()
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0) << "the child could not write";
  EXPECT_EQ(read_text(target), old);
  for (const std::string& name : others("model.safetensors")) {
    EXPECT_EQ(name, "model.safetensors.tmp." + std::to_string(child)) << "unexpected file beside the target";
  }
  // A later writer (this process) commits over the same target.
  auto f = AtomicFile::create(target);
  ASSERT_TRUE(f.ok()) << f.error();
  ASSERT_TRUE(f->write("fresh", 5).is_ok());
  ASSERT_TRUE(f->commit().is_ok());
  EXPECT_EQ(read_text(target), "fresh");
}

// A reader polling the target while a child commits a new version sees the
// old bytes or the new ones, never a mixture or a missing file.
TEST_F(FileUtil, ReaderSeesOldOrNewNeverTorn) {
  const std::string target = path("ckpt.bin");
  const std::string a(1 << 18, 'a'), b(1 << 18, 'b');
  write_text(target, a);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    for (int i = 0; i < 20; ++i) {
      auto f = AtomicFile::create(target);
      const std::string& text = i % 2 == 0 ? b : a;
      if (!f.ok() || !f->write(text.data(), text.size()).is_ok() || !f->commit().is_ok()) ::_exit(5);
    }
    ::_exit(0);
  }
  int status = 0;
  int reads = 0;
  while (::waitpid(child, &status, WNOHANG) == 0) {
    const std::string got = read_text(target);
    ASSERT_TRUE(got == a || got == b) << "torn read of " << got.size() << " bytes";
    ++reads;
  }
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(read_text(target), a);  // the 20th write (i = 19) wrote a
  EXPECT_GT(reads, 0);
}

TEST_F(FileUtil, CreateInAMissingDirectoryFailsNamingThePath) {
  auto f = AtomicFile::create(path("no/such/dir/file"));
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().find("no/such/dir/file"), std::string::npos) << f.error();
}

TEST_F(FileUtil, CheckRegularFileRefusesDevicesFifosDirectoriesAndLargeFiles) {
  Status s = check_regular_file("/dev/zero", "tokenizer", 1 << 20);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("tokenizer /dev/zero"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("a character device"), std::string::npos) << s.message();

  const std::string fifo = path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  s = check_regular_file(fifo, "--config", 1 << 20);  // must not block opening it
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("a FIFO"), std::string::npos) << s.message();

  s = check_regular_file(dir_.string(), "--data", 1 << 20);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("a directory"), std::string::npos) << s.message();

  s = check_regular_file(path("missing"), "meta.json", 1 << 20);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("not found"), std::string::npos) << s.message();

  const std::string big = path("big");
  write_text(big, std::string(101, 'x'));
  s = check_regular_file(big, "meta.json", 100);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("101 bytes"), std::string::npos) << s.message();
  EXPECT_TRUE(check_regular_file(big, "meta.json", 101).is_ok());

  auto data = read_regular_file(big, "meta.json", 101);
  ASSERT_TRUE(data.ok()) << data.error();
  EXPECT_EQ(data->size(), 101u);
  EXPECT_FALSE(read_regular_file("/dev/zero", "meta.json", 101).ok());
}

TEST_F(FileUtil, ProbesRefuseAPathUnderARegularFile) {
  const std::string file = path("plain");
  write_text(file, "x");
  Status s = probe_output_dir(file + "/sub", "out.dir");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("out.dir " + file + "/sub"), std::string::npos) << s.message();
  s = probe_output_dir(file, "out.dir");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("a regular file"), std::string::npos) << s.message();
  s = probe_output_file(file + "/trace.json", "--trace");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("--trace " + file + "/trace.json"), std::string::npos) << s.message();
  s = probe_output_file(file + "/a/trace.json", "--trace", /*create_parent=*/true);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("cannot create"), std::string::npos) << s.message();
  EXPECT_EQ(read_text(file), "x");  // untouched
}

TEST_F(FileUtil, ProbesAcceptWritablePathsAndLeaveNothingBehind) {
  const std::string out = path("run/out");
  ASSERT_TRUE(probe_output_dir(out, "out.dir").is_ok());
  EXPECT_TRUE(fs::is_directory(out));
  EXPECT_TRUE(fs::is_empty(out));
  ASSERT_TRUE(probe_output_file(out + "/trace.json", "--trace").is_ok());
  EXPECT_FALSE(fs::exists(out + "/trace.json"));
  EXPECT_TRUE(fs::is_empty(out));
  Status s = probe_output_file(out, "--trace");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("is a directory"), std::string::npos) << s.message();
  s = probe_output_file(path("nodir/trace.json"), "--trace");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("does not exist"), std::string::npos) << s.message();
  ASSERT_TRUE(probe_output_file(path("made/trace.json"), "--trace", /*create_parent=*/true).is_ok());
  EXPECT_TRUE(fs::is_directory(path("made")));
}

TEST_F(FileUtil, SameFileFollowsLinksAndIsFalseForMissingPaths) {
  const std::string a = path("a"), b = path("b"), link = path("link");
  write_text(a, "1");
  write_text(b, "1");
  fs::create_symlink(a, link);
  EXPECT_TRUE(same_file(a, a));
  EXPECT_TRUE(same_file(a, link));
  EXPECT_TRUE(same_file(dir_.string() + "/./a", a));
  EXPECT_FALSE(same_file(a, b));  // equal bytes, different files
  EXPECT_FALSE(same_file(a, path("missing")));
  EXPECT_FALSE(same_file(path("missing"), path("missing")));
}

// A symbolic link to a regular file is written through: the target gets the
// new bytes atomically, the link stays a link (issue 35 row 1b).
TEST_F(FileUtil, ALinkToARegularFileIsWrittenThroughNeverReplaced) {
  write_text(path("real.json"), "old");
  fs::create_symlink("real.json", path("link.json"));
  auto f = AtomicFile::create(path("link.json"));
  ASSERT_TRUE(f.ok()) << f.error();
  EXPECT_FALSE(f->in_place());
  ASSERT_TRUE(f->write("new", 3).is_ok());
  ASSERT_TRUE(f->commit().is_ok());
  EXPECT_TRUE(fs::is_symlink(path("link.json")));
  EXPECT_EQ(read_text(path("real.json")), "new");
  EXPECT_EQ(others("real.json"), std::vector<std::string>{"link.json"});  // no temporary left
  // A dangling link: the file it names is created, the link kept.
  fs::create_symlink("made.json", path("dangling.json"));
  auto g = AtomicFile::create(path("dangling.json"));
  ASSERT_TRUE(g.ok()) << g.error();
  ASSERT_TRUE(g->write("x", 1).is_ok());
  ASSERT_TRUE(g->commit().is_ok());
  EXPECT_TRUE(fs::is_symlink(path("dangling.json")));
  EXPECT_EQ(read_text(path("made.json")), "x");
}

// A FIFO (and a link to it) is written in place: a reader gets the bytes,
// and the FIFO is still a FIFO afterwards.
TEST_F(FileUtil, AFifoIsWrittenInPlace) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  fs::create_symlink("fifo", path("to-fifo"));
  for (const char* name : {"fifo", "to-fifo"}) {
    std::string got;
    std::thread reader([&] { got = read_text(path("fifo")); });
    {
      auto f = AtomicFile::create(path(name));  // opening blocks until the reader opens
      ASSERT_TRUE(f.ok()) << f.error();
      EXPECT_TRUE(f->in_place());
      ASSERT_TRUE(f->write("through the pipe", 16).is_ok());
      ASSERT_TRUE(f->commit().is_ok());
    }
    reader.join();
    EXPECT_EQ(got, "through the pipe") << name;
    EXPECT_TRUE(fs::is_fifo(path("fifo")));
  }
  EXPECT_TRUE(probe_output_file(path("to-fifo"), "--trace").is_ok());
}

// A character device the test makes (the null device's numbers; as root
// only) takes the bytes in place and stays a device; a full one (/dev/full's
// numbers) fails at commit, naming the path.
TEST_F(FileUtil, ACharacterDeviceIsWrittenInPlace) {
  if (::mknod(path("null").c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0 ||
      ::mknod(path("full").c_str(), S_IFCHR | 0666, makedev(1, 7)) != 0) {
    GTEST_SKIP() << "mknod needs root (" << std::strerror(errno) << ")";
  }
  auto f = AtomicFile::create(path("null"));
  ASSERT_TRUE(f.ok()) << f.error();
  EXPECT_TRUE(f->in_place());
  ASSERT_TRUE(f->write("discarded", 9).is_ok());
  ASSERT_TRUE(f->commit().is_ok());
  EXPECT_TRUE(fs::is_character_file(path("null")));
  EXPECT_TRUE(probe_output_file(path("null"), "--trace").is_ok());
  EXPECT_EQ(others("full"), std::vector<std::string>{"null"});  // no probe file, no temporary
  auto g = AtomicFile::create(path("full"));
  ASSERT_TRUE(g.ok()) << g.error();
  ASSERT_TRUE(g->write("x", 1).is_ok());
  const Status s = g->commit();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find(path("full")), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("No space left"), std::string::npos) << s.message();
  EXPECT_TRUE(fs::is_character_file(path("full")));
}

TEST(ResolveBeside, RelativeToTheContainerAbsoluteUnchanged) {
  EXPECT_EQ(resolve_beside("/runs/a/meta.json", "tok.json"), "/runs/a/tok.json");
  EXPECT_EQ(resolve_beside("/runs/a/meta.json", "../shared/tok.json"), "/runs/shared/tok.json");
  EXPECT_EQ(resolve_beside("cfg/run.toml", "data/x.txt"), "cfg/data/x.txt");
  EXPECT_EQ(resolve_beside("run.toml", "x.txt"), "x.txt");
  EXPECT_EQ(resolve_beside("/runs/a/meta.json", "/abs/tok.json"), "/abs/tok.json");
  EXPECT_EQ(resolve_beside("/runs/a/meta.json", ""), "");
}

// The portable CRC-32 (builds without zlib) is zlib's: the standard check
// value of "123456789", and equal to crc32_of on random bytes of every
// length 0..300 and when continued across a split.
TEST(Crc32Portable, MatchesZlib) {
  EXPECT_EQ(crc32_portable("123456789", 9), 0xCBF43926u);
  EXPECT_EQ(crc32_of("123456789", 9), 0xCBF43926u);
  std::vector<uint8_t> bytes(300);
  uint32_t x = 12345;
  for (auto& b : bytes) b = static_cast<uint8_t>((x = x * 1103515245u + 12345u) >> 23);
  for (size_t n = 0; n <= bytes.size(); ++n) {
    ASSERT_EQ(crc32_portable(bytes.data(), n), crc32_of(bytes.data(), n)) << n << " bytes";
  }
  const uint32_t head = crc32_portable(bytes.data(), 100);
  EXPECT_EQ(crc32_portable(bytes.data() + 100, 200, head), crc32_of(bytes.data(), 300));
}

}  // namespace
}  // namespace tera

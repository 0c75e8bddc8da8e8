// Files that appear whole or not at all: written under a temporary name, flushed to the device
// (fsync), then renamed over the target, whose directory is fsync'd too. A failure removes the
// temporary file and throws a sentence naming the file and the system's reason.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

namespace strata {

// The temporary name a file is written under before its rename.
std::string partial_name(const std::string& path);

// An open temporary file; commit() makes it the target. Destroyed uncommitted: removed.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, std::size_t bytes);
  std::size_t written() const { return written_; }
  // Flush, fsync, close, rename, fsync the directory.
  void commit();

 private:
  [[noreturn]] void fail(const std::string& what);
  std::string path_, partial_;
  std::FILE* file_ = nullptr;
  std::size_t written_ = 0;
};

void write_file_atomically(const std::string& path, const std::string& contents);
void fsync_directory(const std::string& dir);

}  // namespace strata

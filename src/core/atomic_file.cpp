// Atomic file writes.
#include "core/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"

namespace strata {

std::string partial_name(const std::string& path) { return path + ".partial"; }

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)), partial_(partial_name(path_)) {
  file_ = std::fopen(partial_.c_str(), "wb");
  if (!file_) fail("cannot open for writing");
}

AtomicFile::~AtomicFile() {
  if (file_) {
    std::fclose(file_);
    std::remove(partial_.c_str());
  }
}

void AtomicFile::fail(const std::string& what) {
  const std::string reason = std::strerror(errno);
  if (file_) {
    std::fclose(file_);
    file_ = nullptr;
  }
  std::remove(partial_.c_str());  // a failed write leaves nothing behind (a full disk stays usable)
  strata::fail("{}: {} ({})", path_, what, reason);
}

void AtomicFile::write(const void* data, std::size_t bytes) {
  if (bytes == 0) return;
  if (std::fwrite(data, 1, bytes, file_) != bytes) fail("writing failed");
  written_ += bytes;
}

void AtomicFile::commit() {
  if (std::fflush(file_) != 0) fail("writing failed");
  if (::fsync(::fileno(file_)) != 0) fail("flushing to disk failed");
  std::FILE* f = file_;
  file_ = nullptr;
  if (std::fclose(f) != 0) {
    file_ = nullptr;
    std::remove(partial_.c_str());
    strata::fail("{}: closing failed ({})", path_, std::strerror(errno));
  }
  if (std::rename(partial_.c_str(), path_.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(partial_.c_str());
    strata::fail("{}: renaming {} into place failed ({})", path_, partial_, reason);
  }
  const std::filesystem::path parent = std::filesystem::path(path_).parent_path();
  fsync_directory(parent.empty() ? "." : parent.string());
}

void write_file_atomically(const std::string& path, const std::string& contents) {
  AtomicFile f(path);
  f.write(contents.data(), contents.size());
  f.commit();
}

void fsync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;  // best effort: some filesystems do not open directories
  ::fsync(fd);
  ::close(fd);
}

}  // namespace strata

// The safetensors format (Hugging Face): 8-byte little-endian header length N,
// N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]}, ...,
// "__metadata__": {str: str}}, then the raw little-endian tensor bytes.
// The reader treats the file as untrusted: every size, offset and dtype is
// checked, and errors name the file and the tensor.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace tera {

struct StTensorRef {
  std::string name;
  std::string dtype;  // "F32", "F64", "I32", "I64", "BF16", "F16", "U8"
  Shape shape;
  const void* data;
  size_t bytes;
};

int64_t safetensors_dtype_bytes(const std::string& dtype);  // 0 if unknown

// Writes atomically (AtomicFile). Returns the CRC-32 of the whole file.
Expected<uint32_t> write_safetensors(const std::string& path, const std::vector<StTensorRef>& tensors,
                                     const std::map<std::string, std::string>& metadata = {});

// A validated, memory-mapped safetensors model: one file, or (open of a
// "*.index.json" path) the shards a Hugging Face index names, read as one
// (ckpt/safetensors_index.h: every shard exists, every tensor is in exactly
// the shard the index names). path() is the file or the index.
class SafetensorsFile {
 public:
  static Expected<SafetensorsFile> open(const std::string& path);
  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  ~SafetensorsFile();

  const std::vector<StTensorRef>& tensors() const { return tensors_; }
  const StTensorRef* find(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return path_; }
  // The file holding t (its shard for an index), for messages.
  const std::string& path_of(const StTensorRef& t) const;
  // Sharded: the shards' paths in the index's order; one file: empty.
  std::vector<std::string> shard_paths() const;
  // CRC-32 of the whole file, or of the shards one after another (reads every byte).
  uint32_t crc32() const;

 private:
  struct Mapping {
    std::string path;
    void* map = nullptr;
    size_t size = 0;
  };
  SafetensorsFile() = default;
  static Expected<SafetensorsFile> open_one(const std::string& path);
  static Expected<SafetensorsFile> open_sharded(const std::string& index_path);  // safetensors_index.cpp
  void unmap();
  std::string path_;
  std::vector<Mapping> maps_;
  std::vector<StTensorRef> tensors_;
  std::map<std::string, std::string> metadata_;
};

// t's elements as fp32 into out[numel(t.shape)]: F32, or BF16 / F16 widened
// exactly. A non-finite element is refused, naming the file and the tensor.
Status read_tensor_f32(const SafetensorsFile& file, const StTensorRef& t, float* out);

// Parses an in-memory image (the fuzz target and tests use this directly).
Status parse_safetensors(const uint8_t* data, size_t size, const std::string& what,
                         std::vector<StTensorRef>* tensors, std::map<std::string, std::string>* metadata);

}  // namespace tera

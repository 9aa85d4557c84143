#include "proto/payload_codec.h"

#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"

namespace stoker::codec {
namespace {

constexpr int kLevel = 1;

void PutU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint32_t GetU32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}

size_t TrailerBytes(size_t blocks) { return 4 * blocks + 8; }

struct ContextDeleter {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};

}  // namespace

size_t CompressInPlace(uint8_t* data, size_t size) {
  if (size == 0) return 0;
  thread_local std::unique_ptr<ZSTD_CCtx, ContextDeleter> context(
      ZSTD_createCCtx());
  thread_local std::vector<uint8_t> scratch(ZSTD_compressBound(kBlockBytes));
  const size_t blocks = (size + kBlockBytes - 1) / kBlockBytes;
  const size_t trailer = TrailerBytes(blocks);
  std::vector<uint32_t> stored(blocks);
  bool any = false;
  size_t write = 0;
  for (size_t b = 0; b < blocks; ++b) {
    const size_t read = b * kBlockBytes;
    const size_t len = std::min(kBlockBytes, size - read);
    const size_t packed =
        ZSTD_compressCCtx(context.get(), scratch.data(), scratch.size(),
                          data + read, len, kLevel);
    // A block is compressed only where it saves at least the trailer, so
    // the encoding, trailer included, is never longer than the data; the
    // write position never passes the read position.
    if (!ZSTD_isError(packed) && packed + trailer <= len) {
      std::memcpy(data + write, scratch.data(), packed);
      stored[b] = static_cast<uint32_t>(packed);
      write += packed;
      any = true;
    } else {
      if (write != read) std::memmove(data + write, data + read, len);
      stored[b] = static_cast<uint32_t>(len);
      write += len;
    }
  }
  if (!any) return 0;  // Every block as it was, where it was.
  for (size_t b = 0; b < blocks; ++b) PutU32(data + write + 4 * b, stored[b]);
  PutU32(data + write + 4 * blocks, static_cast<uint32_t>(kBlockBytes));
  PutU32(data + write + 4 * blocks + 4, static_cast<uint32_t>(blocks));
  return write + trailer;
}

absl::Status Decompress(const uint8_t* encoded, size_t encoded_size,
                        uint8_t* out, size_t decoded_size) {
  const auto damaged = [&](const std::string& what) {
    return absl::DataLossError(
        absl::StrCat("a zstd batch payload of ", encoded_size, " bytes (",
                     decoded_size, " decoded) is damaged: ", what));
  };
  if (encoded_size < 8) return damaged("no trailer");
  const size_t block = GetU32(encoded + encoded_size - 8);
  const size_t blocks = GetU32(encoded + encoded_size - 4);
  if (block == 0 || blocks != (decoded_size + block - 1) / block) {
    return damaged(absl::StrCat(blocks, " blocks of ", block, " bytes"));
  }
  if (TrailerBytes(blocks) > encoded_size) return damaged("short trailer");
  const uint8_t* sizes = encoded + encoded_size - TrailerBytes(blocks);
  size_t read = 0;
  for (size_t b = 0; b < blocks; ++b) {
    const size_t stored = GetU32(sizes + 4 * b);
    const size_t len = std::min(block, decoded_size - b * block);
    if (stored > static_cast<size_t>(sizes - encoded) - read) {
      return damaged(absl::StrCat("block ", b, " overruns the blocks"));
    }
    uint8_t* dst = out + b * block;
    if (stored == len) {
      std::memcpy(dst, encoded + read, len);
    } else {
      const size_t got = ZSTD_decompress(dst, len, encoded + read, stored);
      if (ZSTD_isError(got) || got != len) {
        return damaged(absl::StrCat(
            "block ", b, ": ",
            ZSTD_isError(got) ? ZSTD_getErrorName(got)
                              : absl::StrCat(got, " bytes, not ", len)));
      }
    }
    read += stored;
  }
  if (encoded + read != sizes) return damaged("bytes between the blocks");
  return absl::OkStatus();
}

}  // namespace stoker::codec

// The encoding of a Batch's payload under COMPRESSION_ZSTD (stoker.proto),
// shared by the daemon, which encodes, and the C++ client, which decodes.
//
// The decoded payload is cut into blocks of kBlockBytes (the last one
// shorter). Each block is compressed with zstd on its own, at level 1, or
// stored as it is where that saves too little; the blocks lie back to back
// and a trailer follows: each block's stored size (uint32, little-endian),
// then the block size and the block count (uint32 each). A block whose
// stored size equals its decoded size is stored as it is.
//
// Why blocks and a trailer: the encoder works in place, in the batch buffer
// the transport sends from, so a compressed batch needs no second buffer
// outside the daemon's memory budget. A block is only ever written at or
// before where it was read, so nothing not yet read is overwritten.
//
// Thread-safe: the encoder keeps its zstd context and scratch per thread.
#ifndef STOKER_PROTO_PAYLOAD_CODEC_H_
#define STOKER_PROTO_PAYLOAD_CODEC_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace stoker::codec {

inline constexpr size_t kBlockBytes = size_t{1} << 20;

// Encodes data[0, size) in place and returns the encoded size, which is
// smaller than `size`; or returns 0, with the data unchanged, when encoding
// would not make it smaller.
size_t CompressInPlace(uint8_t* data, size_t size);

// Decodes `encoded` into `out`, which holds exactly `decoded_size` bytes.
// DataLoss, saying what is wrong, for an encoding that is damaged or does
// not decode to `decoded_size` bytes.
absl::Status Decompress(const uint8_t* encoded, size_t encoded_size,
                        uint8_t* out, size_t decoded_size);

}  // namespace stoker::codec

#endif  // STOKER_PROTO_PAYLOAD_CODEC_H_

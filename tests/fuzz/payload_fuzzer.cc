// Fuzzes the zstd batch payload codec (proto/payload_codec.h), which a
// client runs on bytes from the network: any input decodes to exactly the
// size asked or is DataLoss, in bounds (ASan); and an input encoded in
// place decodes back to itself.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "proto/payload_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  // The first two bytes pick the decoded size the "daemon" claims.
  const size_t claimed = (size_t{data[0]} << 8 | data[1]) * 64;
  const uint8_t* body = data + 2;
  const size_t body_size = size - 2;
  std::vector<uint8_t> out(claimed);
  const absl::Status s =
      stoker::codec::Decompress(body, body_size, out.data(), out.size());
  if (!s.ok() && s.code() != absl::StatusCode::kDataLoss) std::abort();

  // Round trip: the body as a payload, repeated so blocks are compressible.
  std::vector<uint8_t> payload;
  for (int i = 0; i < 64; ++i) payload.insert(payload.end(), body, body + body_size);
  std::vector<uint8_t> encoded = payload;
  const size_t n =
      stoker::codec::CompressInPlace(encoded.data(), encoded.size());
  if (n == 0) {
    if (encoded != payload) std::abort();  // Left as it was.
    return 0;
  }
  if (n >= payload.size()) std::abort();
  std::vector<uint8_t> decoded(payload.size());
  if (!stoker::codec::Decompress(encoded.data(), n, decoded.data(),
                                 decoded.size())
           .ok() ||
      decoded != payload) {
    std::abort();
  }
  return 0;
}

// A reader of the few pickles a (bytes, int) record or a list of byte keys
// is: it interprets opcodes into plain values and never imports, calls or
// constructs anything. Accepted opcodes:
//
//   PROTO FRAME STOP MARK  MEMOIZE BINPUT LONG_BINPUT BINGET LONG_BINGET
//   SHORT_BINBYTES BINBYTES BINBYTES8  SHORT_BINUNICODE BINUNICODE
//   BININT BININT1 BININT2 LONG1  NONE NEWTRUE NEWFALSE
//   TUPLE TUPLE1 TUPLE2 TUPLE3  EMPTY_LIST APPEND APPENDS
//
// plus the one callable protocol 2 uses for bytes, `_codecs.encode(str,
// 'latin1')` (GLOBAL then REDUCE), which the reader evaluates itself as a
// latin-1 encoding. Every other opcode is refused where it stands: GLOBAL
// or STACK_GLOBAL naming anything else, REDUCE, BUILD, INST, OBJ, NEWOBJ,
// EXT*, PERSID... So a pickle that would run os.system is an error, and
// nothing in it runs. Tuples and lists nest at most 100 deep (deeper is
// DataLoss, refused as it is parsed), so freeing a value never recurses
// deeply. Thread-safe: pure functions.
#ifndef STOKER_SERVER_DATASET_IMPORTERS_PICKLE_READER_H_
#define STOKER_SERVER_DATASET_IMPORTERS_PICKLE_READER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace stoker::dataset {

struct PyValue {
  enum class Type { kNone, kBool, kInt, kBytes, kStr, kTuple, kList };
  Type type = Type::kNone;
  int64_t integer = 0;       // kInt, kBool.
  std::string bytes;         // kBytes; kStr as UTF-8.
  std::vector<PyValue> items;  // kTuple, kList.
};

// DataLoss naming the opcode and byte: "pickle: opcode REDUCE ('R') at
// byte 31 is refused (it would call an object; the reader only takes
// plain bytes, ints, tuples and lists)".
absl::StatusOr<PyValue> ParsePickle(std::string_view data);

}  // namespace stoker::dataset

#endif  // STOKER_SERVER_DATASET_IMPORTERS_PICKLE_READER_H_

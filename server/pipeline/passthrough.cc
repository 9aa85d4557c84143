#include "server/pipeline/passthrough.h"

#include <cstring>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/pipeline/registry.h"

namespace stoker::pipeline {
namespace {

// The batch is the record's bytes: both little-endian, so no conversion.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "pass-through copies little-endian record values as they are");

using Passthrough = InputField::Passthrough;

constexpr char kOverflowSkip[] = "skip";
constexpr char kOverflowTruncate[] = "truncate";
constexpr char kOverflowFail[] = "fail";

OpDef MakeDropFieldsDef() {
  OpDef def;
  def.name = "drop_fields";
  def.kind = OpKind::kFields;
  def.doc =
      "Leaves the named fields out of the batch; every other field that no "
      "op binds passes through (scalars and fixed arrays as tensors, "
      "variable-length ones as NAME and NAME.offsets). A name the dataset "
      "lacks fails the stream's open, at this op's line.";
  def.args = {ArgSpec::Required("value", ArgType::kStringList,
                                "The fields to leave out.")};
  def.scalar_arg = "value";
  def.example = "drop_fields: [caption]";
  def.factory = [](const OpArgs& args) -> absl::StatusOr<AnyOp> {
    FieldSelection selection;
    selection.drop = *FindArg<std::vector<std::string>>(args, "value");
    return AnyOp(std::move(selection));
  };
  return def;
}

OpDef MakeRaggedLimitDef() {
  OpDef def;
  def.name = "ragged_limit";
  def.kind = OpKind::kFields;
  def.doc =
      "Sets the batch room of a ragged pass-through field (an ndarray whose "
      "first dimension is -1, bytes, str, an undecoded image) to max_length "
      "rows or bytes per sample, in place of the manifest's max_length; "
      "overflow says what a longer value does: skip the sample, truncate "
      "the value, or fail the stream.";
  def.args = {
      ArgSpec::Required("field", ArgType::kString, "The ragged field."),
      ArgSpec::Required("max_length", ArgType::kInt,
                        "Rows (ndarray) or bytes (bytes, str, image) per "
                        "sample.")
          .AtLeast(1),
      ArgSpec::Optional("overflow", ArgType::kString,
                        ArgValue(std::string(kOverflowFail)),
                        "What a longer value does.")
          .OneOf({kOverflowSkip, kOverflowTruncate, kOverflowFail}),
  };
  def.example = "ragged_limit: {field: tokens, max_length: 512}";
  def.factory = [](const OpArgs& args) -> absl::StatusOr<AnyOp> {
    FieldSelection selection;
    selection.limit_field = *FindArg<std::string>(args, "field");
    selection.max_length =
        static_cast<uint64_t>(*FindArg<int64_t>(args, "max_length"));
    const std::string& overflow = *FindArg<std::string>(args, "overflow");
    selection.overflow = overflow == kOverflowSkip ? RaggedOverflow::kSkip
                         : overflow == kOverflowTruncate
                             ? RaggedOverflow::kTruncate
                             : RaggedOverflow::kFail;
    return AnyOp(std::move(selection));
  };
  return def;
}

std::string FieldNames(absl::Span<const InputField> schema) {
  std::vector<absl::string_view> names;
  for (const InputField& field : schema) names.push_back(field.name);
  return names.empty() ? std::string("none") : absl::StrJoin(names, ", ");
}

// The index of the field named `name`, or schema.size().
size_t IndexOf(absl::Span<const InputField> schema, std::string_view name) {
  for (size_t i = 0; i < schema.size(); ++i) {
    if (schema[i].name == name) return i;
  }
  return schema.size();
}

uint64_t RowBytesOf(const InputField& field) {
  if (field.passthrough == Passthrough::kRaggedBytes) return 1;
  uint64_t row = tensor::DTypeSize(field.dtype);
  for (size_t d = 1; d < field.shape.size(); ++d) {
    row *= static_cast<uint64_t>(field.shape[d]);
  }
  return row;
}

absl::Status Overflow(const PassthroughField& field, uint64_t rows,
                      RaggedOverflow overflow) {
  absl::Status status = absl::ResourceExhaustedError(absl::StrCat(
      "field '", field.name, "' has ", rows,
      field.kind == Passthrough::kRaggedRows ? " rows" : " bytes",
      ", over its ragged_limit max_length ", field.max_rows, " (overflow: ",
      overflow == RaggedOverflow::kSkip ? kOverflowSkip : kOverflowFail, ")"));
  status.SetPayload(
      kRaggedOverflowPayload,
      absl::Cord(overflow == RaggedOverflow::kSkip ? kOverflowSkip
                                                   : kOverflowFail));
  return status;
}

}  // namespace

STOKER_REGISTER_OP(MakeDropFieldsDef);
STOKER_REGISTER_OP(MakeRaggedLimitDef);

std::optional<RaggedOverflow> RaggedOverflowOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kRaggedOverflowPayload);
  if (!payload.has_value()) return std::nullopt;
  return *payload == kOverflowSkip ? RaggedOverflow::kSkip
                                   : RaggedOverflow::kFail;
}

absl::Status BindPassthrough(absl::Span<const InputField> schema,
                             const std::vector<bool>& bound,
                             const std::vector<BoundSelection>& selections,
                             std::vector<tensor::OutputSlot>* slots,
                             std::vector<PassthroughField>* fields) {
  std::vector<bool> dropped(schema.size(), false);
  std::vector<const BoundSelection*> limits(schema.size(), nullptr);
  for (const BoundSelection& s : selections) {
    for (const std::string& name : s.selection.drop) {
      const size_t i = IndexOf(schema, name);
      if (i == schema.size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            s.context, "field '", name,
            "' is not in the dataset; its fields: ", FieldNames(schema)));
      }
      dropped[i] = true;
    }
    if (s.selection.limit_field.empty()) continue;
    const size_t i = IndexOf(schema, s.selection.limit_field);
    if (i == schema.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          s.context, "field '", s.selection.limit_field,
          "' is not in the dataset; its fields: ", FieldNames(schema)));
    }
    if (schema[i].passthrough == Passthrough::kDense) {
      return absl::InvalidArgumentError(
          absl::StrCat(s.context, "field '", s.selection.limit_field,
                       "' has a fixed size; ragged_limit is for ndarrays "
                       "whose first dimension is -1, bytes, str and images "
                       "that are not decoded"));
    }
    limits[i] = &s;
  }
  for (size_t i = 0; i < schema.size(); ++i) {
    if (bound[i] || dropped[i]) continue;
    const InputField& in = schema[i];
    PassthroughField field;
    field.record_index = i;
    field.slot = static_cast<int>(slots->size());
    field.kind = in.passthrough;
    field.utf8 = in.utf8;
    field.name = in.name;
    tensor::TensorSpec spec{in.name, in.dtype, in.shape};
    if (in.passthrough == Passthrough::kDense) {
      field.bytes = spec.bytes();
      slots->push_back(tensor::OutputSlot::Dense(std::move(spec)));
      fields->push_back(std::move(field));
      continue;
    }
    field.row_bytes = RowBytesOf(in);
    field.max_rows = in.max_length;
    if (limits[i] != nullptr) {
      field.max_rows = limits[i]->selection.max_length;
      field.overflow = limits[i]->selection.overflow;
    }
    if (field.max_rows == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "field '", in.name,
          "' is ragged and passes through, but the dataset's manifest has "
          "no max_length for it (a dataset packed before format version 2 "
          "does not): add `ragged_limit: {field: ",
          in.name, ", max_length: N}` to the pipeline, or drop_fields: [",
          in.name, "]"));
    }
    spec.utf8 = in.utf8;
    if (spec.shape.empty()) spec.shape = {-1};
    tensor::OutputSlot values;
    values.kind = tensor::OutputSlot::Kind::kRagged;
    values.row_bytes = field.row_bytes;
    values.max_sample_bytes = field.max_rows * field.row_bytes;
    values.spec = std::move(spec);
    tensor::OutputSlot offsets;
    offsets.kind = tensor::OutputSlot::Kind::kOffsets;
    offsets.spec = {
        absl::StrCat(in.name, ".offsets"), tensor::DType::kInt64, {}};
    offsets.spec.offsets_for = in.name;
    offsets.max_sample_bytes = sizeof(int64_t);
    offsets.values_slot = field.slot;
    slots->push_back(std::move(values));
    slots->push_back(std::move(offsets));
    fields->push_back(std::move(field));
  }
  return absl::OkStatus();
}

absl::Status CopyPassthrough(absl::Span<const PassthroughField> fields,
                             absl::Span<const std::string_view> record,
                             absl::Span<uint8_t* const> dst) {
  for (const PassthroughField& field : fields) {
    const std::string_view value = record[field.record_index];
    if (field.kind == Passthrough::kDense) {
      if (value.size() != field.bytes) {
        return absl::DataLossError(absl::StrCat("field '", field.name, "' has ",
                                                value.size(), " bytes, not ",
                                                field.bytes));
      }
      std::memcpy(dst[field.slot], value.data(), value.size());
      continue;
    }
    if (value.size() % field.row_bytes != 0) {
      return absl::DataLossError(absl::StrCat(
          "field '", field.name, "': ", value.size(),
          " bytes is not whole rows of ", field.row_bytes, " bytes"));
    }
    uint64_t rows = value.size() / field.row_bytes;
    if (rows > field.max_rows) {
      // Without a ragged_limit the slot is the manifest's max_length, which
      // the reader already holds every value to; seeing more is a bad
      // record.
      const RaggedOverflow overflow =
          field.overflow.value_or(RaggedOverflow::kFail);
      if (overflow != RaggedOverflow::kTruncate) {
        if (!field.overflow.has_value()) {
          return absl::DataLossError(
              absl::StrCat("field '", field.name, "' has ", rows,
                           " rows or bytes, over the manifest's max_length ",
                           field.max_rows));
        }
        return Overflow(field, rows, overflow);
      }
      rows = field.max_rows;
      // A str was checked as UTF-8 at pack: a cut before a continuation
      // byte would split a character, so it moves back to that
      // character's first byte.
      while (field.utf8 && rows > 0 &&
             (static_cast<unsigned char>(value[rows]) & 0xC0) == 0x80) {
        --rows;
      }
    }
    if (rows > 0) {
      std::memcpy(dst[field.slot], value.data(), rows * field.row_bytes);
    }
    const int64_t count = static_cast<int64_t>(rows);
    std::memcpy(dst[field.slot + 1], &count, sizeof(count));
  }
  return absl::OkStatus();
}

}  // namespace stoker::pipeline

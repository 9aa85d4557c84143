// `--from list` with --field: a CSV manifest (first line the header of
// column names) or a JSONL one (.jsonl, .ndjson: one object per line) whose
// columns are the --field names. An image or bytes column holds a path,
// relative to the manifest's folder, whose file is the value; every other
// column is inline text turned into the value by its kind's FromText
// (int64, float32/64, str, ndarray). Columns no --field names are ignored.
// A malformed line stops the listing (InvalidArgument "file:line: ...");
// a cell its kind refuses, or a JSON cell nested more than 64 deep, makes
// that row a bad sample, named "file:line", which --on-error skips or
// fails on.

#include <algorithm>
#include <filesystem>
#include <memory>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/dataset/file_util.h"
#include "server/dataset/importers/importers.h"

namespace stoker::dataset {
namespace {

namespace fs = std::filesystem;

// Splits one CSV line (RFC 4180 quoting: "a,b" and "" for a quote).
// False for an unterminated quote: a quoted newline is not supported.
bool SplitCsvLine(absl::string_view line, std::vector<std::string>* cells) {
  cells->clear();
  std::string cell;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cell += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cell += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      cells->push_back(std::move(cell));
      cell.clear();
    } else {
      cell += c;
    }
  }
  cells->push_back(std::move(cell));
  return !quoted;
}

// JSON nested deeper than this within a cell is refused: no field kind
// takes more than a few levels, and dump() recurses once per level.
constexpr int kMaxJsonDepth = 64;

// One field's text from a JSON value: a string as it is, anything else
// (numbers, arrays) as JSON, which FromText reads.
std::string JsonText(const nlohmann::json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

bool TakesPath(const FieldSpec& f) {
  return f.kind->spatial() || f.kind->name() == "bytes";
}

class TableImporter final : public Importer {
 public:
  TableImporter(std::string file, std::vector<FieldFlag> flags)
      : file_(std::move(file)) {
    for (FieldFlag& f : flags) {
      fields_.push_back(std::move(f.spec));
      columns_.push_back(std::move(f.source));
    }
  }

  std::string source() const override { return file_; }

  absl::StatusOr<ImportListing> List() override {
    std::string text;
    if (absl::Status s = ReadFileToString(file_, &text); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(file_, ": ", s.message()));
    }
    const bool jsonl =
        absl::EndsWith(file_, ".jsonl") || absl::EndsWith(file_, ".ndjson");
    ImportListing out;
    out.schema = fields_;
    std::vector<int> column;  // Per field: its CSV column.
    std::vector<std::string> cells;
    int line_number = 0;
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      ++line_number;
      line = absl::StripTrailingAsciiWhitespace(line);
      if (absl::StripAsciiWhitespace(line).empty()) continue;
      const std::string where = absl::StrCat(file_, ":", line_number);
      std::vector<std::string> row(fields_.size());
      std::string bad;  // Why the row is a bad sample, if it is.
      if (jsonl) {
        // The parser is iterative; values nested too deep are dropped as
        // they are parsed, and the key they were under noted.
        std::string key, deep_key;
        nlohmann::json obj = nlohmann::json::parse(
            line,
            [&](int depth, nlohmann::json::parse_event_t event,
                nlohmann::json& parsed) {
              using Event = nlohmann::json::parse_event_t;
              if (depth == 1 && event == Event::key) {
                key = parsed.get<std::string>();
              }
              // A cell's outermost list or object starts at depth 1.
              if (depth <= kMaxJsonDepth ||
                  (event != Event::array_start &&
                   event != Event::object_start)) {
                return true;
              }
              if (deep_key.empty()) deep_key = key;
              return false;
            },
            false);
        if (obj.is_discarded() || !obj.is_object()) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": not a JSON object"));
        }
        for (size_t f = 0; f < fields_.size(); ++f) {
          auto it = obj.find(columns_[f]);
          if (it == obj.end() || it->is_null()) {
            return absl::InvalidArgumentError(absl::StrCat(
                where, ": no column '", columns_[f], "'"));
          }
          if (columns_[f] == deep_key) {
            bad = absl::StrCat("column '", deep_key,
                               "': JSON nested more than ", kMaxJsonDepth,
                               " deep");
          } else {
            row[f] = JsonText(*it);
          }
        }
      } else {
        if (!SplitCsvLine(line, &cells)) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": unterminated quote"));
        }
        if (column.empty()) {  // The header.
          for (const std::string& name : columns_) {
            auto it = std::find(cells.begin(), cells.end(), name);
            if (it == cells.end()) {
              return absl::InvalidArgumentError(absl::StrCat(
                  where, ": the header has no column '", name,
                  "' (--field names a column of the first line)"));
            }
            column.push_back(static_cast<int>(it - cells.begin()));
          }
          continue;
        }
        for (size_t f = 0; f < fields_.size(); ++f) {
          if (static_cast<size_t>(column[f]) >= cells.size()) {
            return absl::InvalidArgumentError(
                absl::StrCat(where, ": ", cells.size(), " columns, '",
                             columns_[f], "' is column ", column[f] + 1));
          }
          row[f] = std::move(cells[column[f]]);
        }
      }
      rows_.push_back(std::move(row));
      bad_.push_back(std::move(bad));
      out.samples.push_back(where);
    }
    return out;
  }

  absl::Status Read(uint64_t i,
                    std::vector<std::string>* values) const override {
    if (!bad_[i].empty()) return absl::InvalidArgumentError(bad_[i]);
    const std::vector<std::string>& row = rows_[i];
    values->resize(fields_.size());
    for (size_t f = 0; f < fields_.size(); ++f) {
      const FieldSpec& field = fields_[f];
      absl::Status s;
      if (TakesPath(field)) {
        const fs::path p(row[f]);
        const std::string path =
            p.is_absolute() ? p.string()
                            : (fs::path(file_).parent_path() / p).string();
        s = ReadFileToString(path, &(*values)[f]);
        if (!s.ok()) {
          s = absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
        }
      } else {
        absl::StatusOr<std::string> v = field.kind->FromText(field, row[f]);
        if (v.ok()) {
          (*values)[f] = *std::move(v);
        } else {
          s = v.status();
        }
      }
      if (!s.ok()) {
        return absl::Status(s.code(), absl::StrCat("column '", columns_[f],
                                                   "': ", s.message()));
      }
    }
    return absl::OkStatus();
  }

 private:
  const std::string file_;
  std::vector<FieldSpec> fields_;    // The schema.
  std::vector<std::string> columns_;  // What each field reads.
  std::vector<std::vector<std::string>> rows_;  // Set by List.
  std::vector<std::string> bad_;  // Per row: why it is a bad sample, or "".
};

}  // namespace

std::unique_ptr<Importer> MakeTableImporter(std::string file,
                                            std::vector<FieldFlag> fields) {
  return std::make_unique<TableImporter>(std::move(file), std::move(fields));
}

}  // namespace stoker::dataset

#pragma once

// A pickle reader that never executes anything: it runs the pickle machine (Python
// Lib/pickletools.py documents every opcode) over protocols 2 to 5 and builds an inert tree.
// A reference to a class or function (GLOBAL, STACK_GLOBAL) becomes a `global_ref` value if the
// caller's allow-list accepts it and stops the read otherwise; calling one (REDUCE, NEWOBJ) and
// restoring its state (BUILD) only record the callable, the arguments and the state. Used for
// DCP's `.metadata`, which `pickle.dump`s a dataclass tree (research/06 §2.5).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"

namespace gpuhost::supervise::pickle {

enum class Kind {
  none,
  boolean,
  integer,      // fits in int64; wider ones are `big_integer`
  big_integer,
  floating,
  text,         // str (and protocol-2 "binstring"), UTF-8 as written
  bytes,        // bytes and bytearray
  list,
  tuple,
  set,          // set and frozenset
  dict,
  global_ref,   // "module.name": a class, function or constant such as torch.float32
  object,       // `callable(*args)` with `state` from BUILD (or null)
};

struct Value {
  Kind kind = Kind::none;
  bool boolean = false;
  std::int64_t integer = 0;
  double floating = 0;
  std::string text;  // text, bytes, or "module.name" of a global_ref
  std::vector<const Value*> items;                            // list, tuple, set
  std::vector<std::pair<const Value*, const Value*>> entries;  // dict, in insertion order
  const Value* callable = nullptr;  // object: the global_ref called
  const Value* args = nullptr;      // object: the argument tuple
  const Value* state = nullptr;     // object: what BUILD gave it

  [[nodiscard]] bool is(Kind k) const { return kind == k; }
  // The dict entry whose key is the string `key`, or null.
  [[nodiscard]] const Value* get(std::string_view key) const;
  // For an object: its class's qualified name ("torch.Size"); otherwise "".
  [[nodiscard]] std::string_view class_name() const;
};

// The tree a pickle describes. Values live as long as the document; memo references and DUP
// share them, so a value may appear in several places (and, through mutation, inside itself).
class Document {
 public:
  [[nodiscard]] const Value& root() const { return *m_root; }

 private:
  friend Result<Document> read(std::string_view, const std::function<bool(std::string_view)>&);
  std::vector<std::unique_ptr<Value>> m_values;
  const Value* m_root = nullptr;
};

// Reads one pickle from `data`. `allowed("module.name")` decides each global reference; the
// first refused one ends the read with invalid_argument naming it. Malformed, truncated or
// unsupported input (protocol 0/1 text opcodes, persistent ids, out-of-band buffers, extension
// codes) is a parse_error saying the opcode and offset.
[[nodiscard]] Result<Document> read(std::string_view data, const std::function<bool(std::string_view)>& allowed);

}  // namespace gpuhost::supervise::pickle

// The pickle machine without execution. Opcode names, arguments and stack effects follow
// Python's Lib/pickletools.py (the `opcodes` table) and Lib/pickle.py (`_Unpickler.load_*`).
#include "supervise/pickle_reader.h"

#include <cstdio>
#include <cstring>
#include <unordered_map>

namespace gpuhost::supervise::pickle {

const Value* Value::get(std::string_view key) const {
  for (const auto& [k, v] : entries)
    if (k->kind == Kind::text && k->text == key) return v;
  return nullptr;
}

std::string_view Value::class_name() const {
  if (kind != Kind::object || callable == nullptr) return {};
  return callable->text;
}

namespace {

// Bounds that no DCP `.metadata` comes near (a 405B-parameter FSDP save on 2048 ranks holds
// about a million items) and that keep hostile input from taking the host's memory.
constexpr std::size_t k_max_values = 64u << 20;
constexpr std::uint64_t k_max_string = 1u << 30;

class Machine {
 public:
  Machine(std::string_view data, const std::function<bool(std::string_view)>& allowed)
      : m_data(data), m_allowed(allowed) {}

  Result<const Value*> run();
  std::vector<std::unique_ptr<Value>> take_values() { return std::move(m_values); }

 private:
  std::string_view m_data;
  const std::function<bool(std::string_view)>& m_allowed;
  std::size_t m_pos = 0;
  std::size_t m_op_at = 0;  // where the current opcode began, for messages
  unsigned char m_op = 0;
  std::vector<std::unique_ptr<Value>> m_values;
  std::vector<Value*> m_stack;
  std::vector<std::size_t> m_marks;
  std::unordered_map<std::uint64_t, Value*> m_memo;

  std::unexpected<Error> fail(std::string_view what) const {
    char op[8];
    if (m_op >= 0x20 && m_op < 0x7f)
      std::snprintf(op, sizeof op, "'%c'", m_op);
    else
      std::snprintf(op, sizeof op, "0x%02x", m_op);
    return make_error(ErrorCode::parse_error,
                      "pickle opcode " + std::string(op) + " at byte " + std::to_string(m_op_at) + ": " +
                          std::string(what));
  }

  Result<Value*> make(Kind kind) {
    if (m_values.size() >= k_max_values) return fail("more than 64 Mi values");
    m_values.push_back(std::make_unique<Value>());
    m_values.back()->kind = kind;
    return m_values.back().get();
  }

  Result<std::string_view> take(std::uint64_t n) {
    if (n > m_data.size() - m_pos) return fail("the pickle ends inside an argument (truncated?)");
    std::string_view out = m_data.substr(m_pos, static_cast<std::size_t>(n));
    m_pos += static_cast<std::size_t>(n);
    return out;
  }
  Result<std::uint64_t> unsigned_le(int bytes) {
    std::string_view raw = GPUHOST_TRY(take(static_cast<std::uint64_t>(bytes)));
    std::uint64_t v = 0;
    for (int i = bytes; i-- > 0;) v = v << 8 | static_cast<unsigned char>(raw[static_cast<std::size_t>(i)]);
    return v;
  }
  Result<std::string_view> line() {
    const std::size_t end = m_data.find('\n', m_pos);
    if (end == std::string_view::npos) return fail("the pickle ends inside a text argument (truncated?)");
    std::string_view out = m_data.substr(m_pos, end - m_pos);
    m_pos = end + 1;
    return out;
  }

  Result<Value*> pop() {
    if (m_stack.empty() || (!m_marks.empty() && m_stack.size() <= m_marks.back()))
      return fail("stack underflow (corrupt pickle)");
    Value* v = m_stack.back();
    m_stack.pop_back();
    return v;
  }
  Result<Value*> top() {
    if (m_stack.empty()) return fail("stack underflow (corrupt pickle)");
    return m_stack.back();
  }
  // Everything above the newest MARK, which is removed.
  Result<std::vector<Value*>> pop_mark() {
    if (m_marks.empty()) return fail("no MARK to pop to (corrupt pickle)");
    const std::size_t mark = m_marks.back();
    m_marks.pop_back();
    std::vector<Value*> items(m_stack.begin() + static_cast<std::ptrdiff_t>(mark), m_stack.end());
    m_stack.resize(mark);
    return items;
  }

  Result<void> push_text(Kind kind, std::uint64_t length) {
    if (length > k_max_string) return fail("a string longer than 1 GiB");
    std::string_view raw = GPUHOST_TRY(take(length));
    Value* v = GPUHOST_TRY(make(kind));
    v->text.assign(raw);
    m_stack.push_back(v);
    return {};
  }
  Result<void> push_int(std::int64_t n) {
    Value* v = GPUHOST_TRY(make(Kind::integer));
    v->integer = n;
    m_stack.push_back(v);
    return {};
  }
  // LONG1/LONG4: little-endian two's complement of `length` bytes.
  Result<void> push_long(std::uint64_t length) {
    if (length > k_max_string) return fail("an integer longer than 1 GiB");
    std::string_view raw = GPUHOST_TRY(take(length));
    if (length > 8) {
      Value* v = GPUHOST_TRY(make(Kind::big_integer));
      v->text.assign(raw);
      m_stack.push_back(v);
      return {};
    }
    std::uint64_t u = 0;
    for (std::size_t i = raw.size(); i-- > 0;) u = u << 8 | static_cast<unsigned char>(raw[i]);
    if (length > 0 && length < 8 && (static_cast<unsigned char>(raw.back()) & 0x80) != 0)
      u |= ~std::uint64_t{0} << (8 * length);  // sign-extend
    return push_int(static_cast<std::int64_t>(u));
  }
  Result<void> push_global(std::string_view module, std::string_view name) {
    std::string qualified = std::string(module) + "." + std::string(name);
    if (!m_allowed(qualified))
      return make_error(ErrorCode::invalid_argument,
                        "the pickle refers to " + qualified + ", which is not on the allow-list");
    Value* v = GPUHOST_TRY(make(Kind::global_ref));
    v->text = std::move(qualified);
    m_stack.push_back(v);
    return {};
  }
  Result<void> push_call(Value* callable, Value* args) {
    if (callable->kind != Kind::global_ref) return fail("calls something that is not a global");
    if (args->kind != Kind::tuple) return fail("call arguments are not a tuple");
    // Python 3.11+ pickles an Enum member as builtins.getattr(EnumClass, "NAME"): read that as
    // the member itself, a reference to "EnumClass.NAME".
    if (callable->text == "builtins.getattr" && args->items.size() == 2 &&
        args->items[0]->kind == Kind::global_ref && args->items[1]->kind == Kind::text) {
      Value* v = GPUHOST_TRY(make(Kind::global_ref));
      v->text = args->items[0]->text + "." + args->items[1]->text;
      m_stack.push_back(v);
      return {};
    }
    Value* v = GPUHOST_TRY(make(Kind::object));
    v->callable = callable;
    v->args = args;
    m_stack.push_back(v);
    return {};
  }
  Result<void> memo_put(std::uint64_t index) {
    Value* v = GPUHOST_TRY(top());
    m_memo[index] = v;
    return {};
  }
  Result<void> memo_get(std::uint64_t index) {
    auto it = m_memo.find(index);
    if (it == m_memo.end()) return fail("memo entry " + std::to_string(index) + " was never stored");
    m_stack.push_back(it->second);
    return {};
  }
  Result<void> set_items(Value* dict, const std::vector<Value*>& items) {
    if (dict->kind != Kind::dict) return fail("SETITEM(S) on something that is not a dict");
    if (items.size() % 2 != 0) return fail("SETITEMS with an odd number of items");
    for (std::size_t i = 0; i < items.size(); i += 2) {
      bool replaced = false;
      for (auto& [k, v] : dict->entries) {
        if (items[i]->kind == Kind::text && k->kind == Kind::text && k->text == items[i]->text) {
          v = items[i + 1];
          replaced = true;
        }
      }
      if (!replaced) dict->entries.emplace_back(items[i], items[i + 1]);
    }
    return {};
  }
  Result<void> append_items(Value* list, const std::vector<Value*>& items) {
    // APPENDS may also target an object with an extend() (pickle.py load_appends); the readers
    // here only meet lists, so anything else is refused.
    if (list->kind != Kind::list && list->kind != Kind::set) return fail("APPEND(S) on something that is not a list");
    for (Value* item : items) list->items.push_back(item);
    return {};
  }
  Result<void> make_sequence(Kind kind, std::vector<Value*> items) {
    Value* v = GPUHOST_TRY(make(kind));
    v->items.assign(items.begin(), items.end());
    m_stack.push_back(v);
    return {};
  }

  Result<bool> step();
};

Result<bool> Machine::step() {
  m_op_at = m_pos;
  if (m_pos >= m_data.size())
    return make_error(ErrorCode::parse_error, "the pickle ends at byte " + std::to_string(m_pos) +
                                                  " before its STOP opcode (truncated?)");
  std::string_view op = GPUHOST_TRY(take(1));
  m_op = static_cast<unsigned char>(op[0]);
  switch (m_op) {
    case 0x80: {  // PROTO
      const std::uint64_t protocol = GPUHOST_TRY(unsigned_le(1));
      if (protocol > 5) return fail("protocol " + std::to_string(protocol) + " is newer than 5");
      return true;
    }
    case 0x95: GPUHOST_TRY(unsigned_le(8)); return true;  // FRAME: a length hint only
    case '.': return false;                                 // STOP
    case '(': m_marks.push_back(m_stack.size()); return true;  // MARK
    case '0': GPUHOST_TRY(pop()); return true;                 // POP
    case '1': GPUHOST_TRY(pop_mark()); return true;            // POP_MARK
    case '2': m_stack.push_back(GPUHOST_TRY(top())); return true;  // DUP

    case 'N': GPUHOST_TRY_VOID(make_sequence(Kind::none, {})); return true;
    case 0x88:
    case 0x89: {  // NEWTRUE, NEWFALSE
      Value* v = GPUHOST_TRY(make(Kind::boolean));
      v->boolean = m_op == 0x88;
      m_stack.push_back(v);
      return true;
    }
    case 'J': {  // BININT: 4-byte signed
      const auto u = static_cast<std::uint32_t>(GPUHOST_TRY(unsigned_le(4)));
      GPUHOST_TRY_VOID(push_int(static_cast<std::int32_t>(u)));
      return true;
    }
    case 'K': GPUHOST_TRY_VOID(push_int(static_cast<std::int64_t>(GPUHOST_TRY(unsigned_le(1))))); return true;
    case 'M': GPUHOST_TRY_VOID(push_int(static_cast<std::int64_t>(GPUHOST_TRY(unsigned_le(2))))); return true;
    case 0x8a: GPUHOST_TRY_VOID(push_long(GPUHOST_TRY(unsigned_le(1)))); return true;  // LONG1
    case 0x8b: GPUHOST_TRY_VOID(push_long(GPUHOST_TRY(unsigned_le(4)))); return true;  // LONG4
    case 'G': {  // BINFLOAT: 8-byte big-endian IEEE 754
      std::string_view raw = GPUHOST_TRY(take(8));
      std::uint64_t bits = 0;
      for (char c : raw) bits = bits << 8 | static_cast<unsigned char>(c);
      Value* v = GPUHOST_TRY(make(Kind::floating));
      std::memcpy(&v->floating, &bits, sizeof bits);
      m_stack.push_back(v);
      return true;
    }

    case 0x8c: GPUHOST_TRY_VOID(push_text(Kind::text, GPUHOST_TRY(unsigned_le(1)))); return true;  // SHORT_BINUNICODE
    case 'X': GPUHOST_TRY_VOID(push_text(Kind::text, GPUHOST_TRY(unsigned_le(4)))); return true;   // BINUNICODE
    case 0x8d: GPUHOST_TRY_VOID(push_text(Kind::text, GPUHOST_TRY(unsigned_le(8)))); return true;  // BINUNICODE8
    case 'U': GPUHOST_TRY_VOID(push_text(Kind::text, GPUHOST_TRY(unsigned_le(1)))); return true;   // SHORT_BINSTRING
    case 'T': GPUHOST_TRY_VOID(push_text(Kind::text, GPUHOST_TRY(unsigned_le(4)))); return true;   // BINSTRING
    case 'C': GPUHOST_TRY_VOID(push_text(Kind::bytes, GPUHOST_TRY(unsigned_le(1)))); return true;  // SHORT_BINBYTES
    case 'B': GPUHOST_TRY_VOID(push_text(Kind::bytes, GPUHOST_TRY(unsigned_le(4)))); return true;  // BINBYTES
    case 0x8e:                                                                                  // BINBYTES8
    case 0x96: GPUHOST_TRY_VOID(push_text(Kind::bytes, GPUHOST_TRY(unsigned_le(8)))); return true;  // BYTEARRAY8

    case ']': GPUHOST_TRY_VOID(make_sequence(Kind::list, {})); return true;   // EMPTY_LIST
    case ')': GPUHOST_TRY_VOID(make_sequence(Kind::tuple, {})); return true;  // EMPTY_TUPLE
    case '}': GPUHOST_TRY_VOID(make_sequence(Kind::dict, {})); return true;   // EMPTY_DICT
    case 0x8f: GPUHOST_TRY_VOID(make_sequence(Kind::set, {})); return true;  // EMPTY_SET
    case 'l': GPUHOST_TRY_VOID(make_sequence(Kind::list, GPUHOST_TRY(pop_mark()))); return true;   // LIST
    case 't': GPUHOST_TRY_VOID(make_sequence(Kind::tuple, GPUHOST_TRY(pop_mark()))); return true;  // TUPLE
    case 0x91: GPUHOST_TRY_VOID(make_sequence(Kind::set, GPUHOST_TRY(pop_mark()))); return true;   // FROZENSET
    case 0x85:
    case 0x86:
    case 0x87: {  // TUPLE1..3
      const std::size_t n = static_cast<std::size_t>(m_op - 0x84);
      std::vector<Value*> items(n);
      for (std::size_t i = n; i-- > 0;) items[i] = GPUHOST_TRY(pop());
      GPUHOST_TRY_VOID(make_sequence(Kind::tuple, std::move(items)));
      return true;
    }
    case 'd': {  // DICT
      std::vector<Value*> items = GPUHOST_TRY(pop_mark());
      GPUHOST_TRY_VOID(make_sequence(Kind::dict, {}));
      GPUHOST_TRY_VOID(set_items(m_stack.back(), items));
      return true;
    }
    case 'a': {  // APPEND
      Value* item = GPUHOST_TRY(pop());
      GPUHOST_TRY_VOID(append_items(GPUHOST_TRY(top()), {item}));
      return true;
    }
    case 'e':       // APPENDS
    case 0x90: {  // ADDITEMS
      std::vector<Value*> items = GPUHOST_TRY(pop_mark());
      GPUHOST_TRY_VOID(append_items(GPUHOST_TRY(top()), items));
      return true;
    }
    case 's': {  // SETITEM
      Value* value = GPUHOST_TRY(pop());
      Value* key = GPUHOST_TRY(pop());
      GPUHOST_TRY_VOID(set_items(GPUHOST_TRY(top()), {key, value}));
      return true;
    }
    case 'u': {  // SETITEMS
      std::vector<Value*> items = GPUHOST_TRY(pop_mark());
      GPUHOST_TRY_VOID(set_items(GPUHOST_TRY(top()), items));
      return true;
    }

    case 'c': {  // GLOBAL "module\nname\n"
      std::string_view module = GPUHOST_TRY(line());
      std::string_view name = GPUHOST_TRY(line());
      GPUHOST_TRY_VOID(push_global(module, name));
      return true;
    }
    case 0x93: {  // STACK_GLOBAL
      Value* name = GPUHOST_TRY(pop());
      Value* module = GPUHOST_TRY(pop());
      if (module->kind != Kind::text || name->kind != Kind::text) return fail("STACK_GLOBAL needs two strings");
      GPUHOST_TRY_VOID(push_global(module->text, name->text));
      return true;
    }
    case 'R':       // REDUCE: callable(*args)
    case 0x81: {  // NEWOBJ: cls.__new__(cls, *args)
      Value* args = GPUHOST_TRY(pop());
      Value* callable = GPUHOST_TRY(pop());
      GPUHOST_TRY_VOID(push_call(callable, args));
      return true;
    }
    case 0x92: {  // NEWOBJ_EX: cls.__new__(cls, *args, **kwargs); kwargs kept as the state
      Value* kwargs = GPUHOST_TRY(pop());
      Value* args = GPUHOST_TRY(pop());
      Value* cls = GPUHOST_TRY(pop());
      GPUHOST_TRY_VOID(push_call(cls, args));
      if (!kwargs->entries.empty()) m_stack.back()->state = kwargs;
      return true;
    }
    case 'b': {  // BUILD: obj.__setstate__(state)
      Value* state = GPUHOST_TRY(pop());
      Value* object = GPUHOST_TRY(top());
      if (object->kind != Kind::object) return fail("BUILD on something that is not an object");
      object->state = state;
      return true;
    }

    case 'q': GPUHOST_TRY_VOID(memo_put(GPUHOST_TRY(unsigned_le(1)))); return true;  // BINPUT
    case 'r': GPUHOST_TRY_VOID(memo_put(GPUHOST_TRY(unsigned_le(4)))); return true;  // LONG_BINPUT
    case 0x94: GPUHOST_TRY_VOID(memo_put(m_memo.size())); return true;                // MEMOIZE
    case 'h': GPUHOST_TRY_VOID(memo_get(GPUHOST_TRY(unsigned_le(1)))); return true;  // BINGET
    case 'j': GPUHOST_TRY_VOID(memo_get(GPUHOST_TRY(unsigned_le(4)))); return true;  // LONG_BINGET

    case 'P':
    case 'Q': return fail("persistent id (tensor storage inside the pickle) is not read here");
    case 0x97:
    case 0x98: return fail("out-of-band buffers (protocol 5) are not read here");
    case 0x82:
    case 0x83:
    case 0x84: return fail("copyreg extension codes are not read here");
    case 'I':
    case 'L':
    case 'F':
    case 'S':
    case 'V':
    case 'p':
    case 'g':
    case 'i':
    case 'o': return fail("protocol 0/1 text opcodes are not read here (DCP writes protocol 4)");
    default: return fail("unknown opcode (not a pickle, or corrupt)");
  }
}

Result<const Value*> Machine::run() {
  while (GPUHOST_TRY(step())) {
  }
  if (m_stack.size() != 1 || !m_marks.empty())
    return fail("STOP with " + std::to_string(m_stack.size()) + " values on the stack (corrupt pickle)");
  return m_stack.back();
}

}  // namespace

Result<Document> read(std::string_view data, const std::function<bool(std::string_view)>& allowed) {
  Machine machine(data, allowed);
  const Value* root = GPUHOST_TRY(machine.run());
  Document document;
  document.m_values = machine.take_values();
  document.m_root = root;
  return document;
}

}  // namespace gpuhost::supervise::pickle

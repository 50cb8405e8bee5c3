#include "model/gguf.h"

#include <bit>
#include <limits>

#include "model/checked_math.h"

namespace ignis::model {

static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes a little-endian host");

namespace {

constexpr std::uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr std::uint64_t kDefaultAlignment = 32;
constexpr int kMaxDims = 4;  // GGML_MAX_DIMS
// Arrays of arrays are legal but no model uses more than one level; deep nesting only
// serves to exhaust the stack.
constexpr int kMaxArrayDepth = 8;

// The fewest bytes one element of a type can take in the file, used to bound counts before
// anything is allocated for them.
std::uint64_t min_encoded_size(GgufType t) {
  switch (t) {
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::BOOL: return 1;
    case GgufType::U16:
    case GgufType::I16: return 2;
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::F32: return 4;
    case GgufType::U64:
    case GgufType::I64:
    case GgufType::F64: return 8;
    case GgufType::STRING: return 8;          // the length
    case GgufType::ARRAY: return 4 + 8;       // element type and count
  }
  return 1;
}

bool is_scalar(GgufType t) { return t != GgufType::STRING && t != GgufType::ARRAY; }

bool is_known_type(std::uint32_t id) { return id <= static_cast<std::uint32_t>(GgufType::F64); }

}  // namespace

std::string gguf_type_name(GgufType type) {
  switch (type) {
    case GgufType::U8: return "u8";
    case GgufType::I8: return "i8";
    case GgufType::U16: return "u16";
    case GgufType::I16: return "i16";
    case GgufType::U32: return "u32";
    case GgufType::I32: return "i32";
    case GgufType::F32: return "f32";
    case GgufType::BOOL: return "bool";
    case GgufType::STRING: return "string";
    case GgufType::ARRAY: return "array";
    case GgufType::U64: return "u64";
    case GgufType::I64: return "i64";
    case GgufType::F64: return "f64";
  }
  return detail::concat("unknown(", static_cast<std::uint32_t>(type), ")");
}

// ---------------------------------------------------------------------------------------------
// GgufValue

bool GgufValue::is_integer() const {
  switch (type_) {
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::U16:
    case GgufType::I16:
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::U64:
    case GgufType::I64: return true;
    default: return false;
  }
}

void GgufValue::require(GgufType want, std::string_view what) const {
  if (type_ == want) return;
  const std::string got =
      type_ == GgufType::ARRAY ? "array of " + gguf_type_name(element_type_) : gguf_type_name(type_);
  fail_expected(std::string(what), "type", gguf_type_name(want), got);
}

void GgufValue::require_array(GgufType want_element, std::string_view what) const {
  const std::string want = "array of " + gguf_type_name(want_element);
  if (type_ != GgufType::ARRAY) fail_expected(std::string(what), "type", want, gguf_type_name(type_));
  if (element_type_ != want_element)
    fail_expected(std::string(what), "type", want, "array of " + gguf_type_name(element_type_));
}

std::int64_t GgufValue::as_int(std::string_view what) const {
  switch (type_) {
    case GgufType::U8: return as<std::uint8_t>(what);
    case GgufType::I8: return as<std::int8_t>(what);
    case GgufType::U16: return as<std::uint16_t>(what);
    case GgufType::I16: return as<std::int16_t>(what);
    case GgufType::U32: return as<std::uint32_t>(what);
    case GgufType::I32: return as<std::int32_t>(what);
    case GgufType::I64: return as<std::int64_t>(what);
    case GgufType::U64: {
      const std::uint64_t v = as<std::uint64_t>(what);
      check_arg(v <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()), std::string(what),
                "value", "at most INT64_MAX", v);
      return static_cast<std::int64_t>(v);
    }
    default: fail_expected(std::string(what), "type", "an integer", gguf_type_name(type_));
  }
}

const std::vector<GgufValue>& GgufValue::nested(std::string_view what) const {
  require_array(GgufType::ARRAY, what);
  return arrays_;
}

std::string GgufValue::summary() const {
  switch (type_) {
    case GgufType::STRING: {
      const std::size_t kMax = 60;
      return "\"" + (string_.size() > kMax ? string_.substr(0, kMax) + "..." : string_) + "\"";
    }
    case GgufType::ARRAY: return detail::concat("[", gguf_type_name(element_type_), " x ", count_, "]");
    case GgufType::BOOL: return scalar_ != 0 ? "true" : "false";
    case GgufType::F32: return detail::concat(as<float>(""));
    case GgufType::F64: return detail::concat(as<double>(""));
    case GgufType::U64: return std::to_string(scalar_);
    default: return std::to_string(as_int(""));
  }
}

// ---------------------------------------------------------------------------------------------
// Parsing

class GgufParser {
 public:
  explicit GgufParser(GgufFile& file) : f_(file), bytes_(file.bytes_) {}

  void run() {
    const std::uint32_t magic = u32("magic");
    if (magic != kMagic)
      fail(detail::concat("not a GGUF file (magic 0x", std::hex, magic, ", expected 0x", kMagic, ")"));
    const std::uint32_t version = u32("version");
    if (version == __builtin_bswap32(2u) || version == __builtin_bswap32(3u))
      fail("big-endian GGUF files are not supported");
    if (version != 2 && version != 3) fail(detail::concat("unsupported version ", version, " (supported: 2, 3)"));
    f_.version_ = version;
    const std::uint64_t n_tensors = u64("tensor count");
    const std::uint64_t n_kv = u64("metadata count");
    // Each key/value takes at least a key length, a type and one byte of value.
    bound_count(n_kv, 8 + 4 + 1, "metadata count");
    f_.metadata_.reserve(static_cast<std::size_t>(n_kv));
    for (std::uint64_t i = 0; i < n_kv; ++i) read_kv();
    read_alignment();
    // Each tensor info takes at least a name length, n_dims, a type and an offset.
    bound_count(n_tensors, 8 + 4 + 4 + 8, "tensor count");
    f_.tensors_.reserve(static_cast<std::size_t>(n_tensors));
    for (std::uint64_t i = 0; i < n_tensors; ++i) read_tensor_info();
    place_tensors();
  }

 private:
  [[noreturn]] void fail(const std::string& message) const {
    throw Error("gguf: " + f_.source_ + ": " + message);
  }

  std::uint64_t remaining() const { return bytes_.size() - pos_; }

  const std::byte* take(std::uint64_t n, std::string_view what) {
    if (n > remaining())
      fail(detail::concat("truncated: ", what, " needs ", n, " bytes at offset ", pos_, ", file size ",
                          bytes_.size()));
    const std::byte* p = bytes_.data() + pos_;
    pos_ += n;
    return p;
  }

  template <class T>
  T scalar(std::string_view what) {
    T v;
    std::memcpy(&v, take(sizeof(T), what), sizeof(T));
    return v;
  }
  std::uint32_t u32(std::string_view what) { return scalar<std::uint32_t>(what); }
  std::uint64_t u64(std::string_view what) { return scalar<std::uint64_t>(what); }

  std::string string(std::string_view what) {
    const std::uint64_t len = u64(what);
    if (len > remaining())
      fail(detail::concat(what, ": string length ", len, " at offset ", pos_ - 8, " exceeds the ", remaining(),
                          " bytes left in the file"));
    const std::byte* p = take(len, what);
    return std::string(reinterpret_cast<const char*>(p), static_cast<std::size_t>(len));
  }

  // Rejects counts that could not fit in the rest of the file, before allocating for them.
  void bound_count(std::uint64_t count, std::uint64_t min_each, std::string_view what) const {
    if (count > remaining() / min_each)
      fail(detail::concat(what, " ", count, " is impossible: ", remaining(), " bytes left in the file"));
  }

  GgufType value_type(std::string_view what) {
    const std::uint32_t id = u32(what);
    if (!is_known_type(id)) fail(detail::concat(what, ": unknown value type ", id));
    return static_cast<GgufType>(id);
  }

  void read_kv() {
    const std::uint64_t at = pos_;
    std::string key = string("metadata key");
    if (f_.key_index_.count(key) != 0) fail(detail::concat("duplicate metadata key '", key, "' at offset ", at));
    const GgufType type = value_type("type of key '" + key + "'");
    GgufValue value = read_value(type, "key '" + key + "'", 0);
    f_.key_index_.emplace(key, f_.metadata_.size());
    f_.metadata_.emplace_back(std::move(key), std::move(value));
  }

  GgufValue read_value(GgufType type, const std::string& what, int depth) {
    GgufValue v;
    v.type_ = type;
    if (type == GgufType::STRING) {
      v.string_ = string(what);
    } else if (type == GgufType::ARRAY) {
      read_array(v, what, depth + 1);
    } else {
      const std::uint64_t n = min_encoded_size(type);
      std::memcpy(&v.scalar_, take(n, what), static_cast<std::size_t>(n));
    }
    return v;
  }

  void read_array(GgufValue& v, const std::string& what, int depth) {
    if (depth > kMaxArrayDepth) fail(detail::concat(what, ": arrays nested deeper than ", kMaxArrayDepth));
    v.element_type_ = value_type(what + " array element type");
    v.count_ = u64(what + " array length");
    const std::uint64_t min_each = min_encoded_size(v.element_type_);
    bound_count(v.count_, min_each, what + " array length");
    const auto n = static_cast<std::size_t>(v.count_);
    if (is_scalar(v.element_type_)) {
      const std::byte* p = take(v.count_ * min_each, what);  // bound_count made this product safe
      v.raw_.assign(p, p + n * min_each);
    } else if (v.element_type_ == GgufType::STRING) {
      v.strings_.reserve(n);
      for (std::size_t i = 0; i < n; ++i) v.strings_.push_back(string(what));
    } else {
      v.arrays_.reserve(n);
      for (std::size_t i = 0; i < n; ++i) {
        GgufValue inner;
        inner.type_ = GgufType::ARRAY;
        read_array(inner, what, depth + 1);
        v.arrays_.push_back(std::move(inner));
      }
    }
  }

  void read_alignment() {
    const GgufValue* a = f_.find("general.alignment");
    if (a == nullptr) return;
    if (a->type() != GgufType::U32)
      fail("general.alignment: expected type u32, got " + gguf_type_name(a->type()));
    const std::uint32_t align = a->as<std::uint32_t>("general.alignment");
    if (align == 0 || (align & (align - 1)) != 0)
      fail(detail::concat("general.alignment: expected a power of two, got ", align));
    f_.alignment_ = align;
  }

  void read_tensor_info() {
    GgufTensor t;
    t.name = string("tensor name");
    const std::string what = "tensor '" + t.name + "'";
    if (f_.tensor_index_.count(t.name) != 0) fail("duplicate " + what);
    const std::uint32_t n_dims = u32(what + " n_dims");
    if (n_dims > kMaxDims) fail(detail::concat(what, ": n_dims ", n_dims, " exceeds the maximum ", kMaxDims));
    std::uint64_t n_elements = 1;
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      const std::uint64_t dim = u64(what + " dims");
      const auto product = checked_mul(n_elements, dim);
      if (!product || *product > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        fail(detail::concat(what, ": element count overflows at dim ", d, " (", dim, ")"));
      n_elements = *product;
      t.dims.push_back(dim);
    }
    t.shape.assign(t.dims.rbegin(), t.dims.rend());
    t.n_elements = n_elements;
    const std::uint32_t type_id = u32(what + " type");
    const auto info = ggml_type_info(type_id);
    if (!info) fail(detail::concat(what, ": unknown ggml type ", type_id));
    t.type = static_cast<GgmlType>(type_id);
    const std::uint64_t row = t.dims.empty() ? 1 : t.dims[0];
    if (row % info->block_elems != 0)
      fail(detail::concat(what, ": innermost dim ", row, " is not a multiple of the ", info->name, " block size ",
                          info->block_elems));
    t.offset = u64(what + " offset");
    if (t.offset % f_.alignment_ != 0)
      fail(detail::concat(what, ": offset ", t.offset, " is not a multiple of the alignment ", f_.alignment_));
    f_.tensor_index_.emplace(t.name, f_.tensors_.size());
    f_.tensors_.push_back(std::move(t));
  }

  // Finds the data section and gives every tensor its bytes, checking each lies inside the
  // file and that no two overlap.
  void place_tensors() {
    const auto start = checked_align_up(pos_, f_.alignment_);
    if (!start) fail("data section offset overflows");
    f_.data_offset_ = *start;
    if (f_.tensors_.empty()) return;
    const std::uint64_t size = bytes_.size();
    if (f_.data_offset_ > size)
      fail(detail::concat("data section starts at ", f_.data_offset_, ", past the end of the file (size ", size, ")"));
    std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;  // [begin, end) in the file
    for (GgufTensor& t : f_.tensors_) {
      const GgmlTypeInfo info = *ggml_type_info(static_cast<std::uint32_t>(t.type));
      // n_elements <= INT64_MAX and block_bytes <= 292 keep this product in range.
      const std::uint64_t n_bytes = t.n_elements / info.block_elems * info.block_bytes;
      const auto begin = checked_add(f_.data_offset_, t.offset);
      const auto end = begin ? checked_add(*begin, n_bytes) : std::nullopt;
      if (!end || *end > size)
        fail(detail::concat("tensor '", t.name, "' data [", begin ? std::to_string(*begin) : "overflow", ", ",
                            end ? std::to_string(*end) : "overflow", ") exceeds file size ", size));
      t.data = bytes_.subspan(static_cast<std::size_t>(*begin), static_cast<std::size_t>(n_bytes));
      if (n_bytes > 0) ranges.emplace_back(*begin, *end);
    }
    if (const auto overlap = first_overlap(std::move(ranges)))
      fail(detail::concat("tensor data ranges overlap at offset ", *overlap));
  }

  GgufFile& f_;
  std::span<const std::byte> bytes_;
  std::uint64_t pos_ = 0;
};

// ---------------------------------------------------------------------------------------------
// GgufFile

GgufFile GgufFile::open(const std::string& path) {
  auto mapped = std::make_unique<MappedFile>(path);
  GgufFile file = parse(mapped->bytes(), path);
  file.file_ = std::move(mapped);  // the map's address survives the move, so spans stay valid
  return file;
}

GgufFile GgufFile::parse(std::span<const std::byte> bytes, std::string source) {
  GgufFile file;
  file.bytes_ = bytes;
  file.source_ = std::move(source);
  file.alignment_ = kDefaultAlignment;
  GgufParser(file).run();
  return file;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  const auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &metadata_[it->second].second;
}

const GgufValue& GgufFile::value(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) throw Error(detail::concat("gguf: ", source_, ": key '", key, "' not found"));
  return *v;
}

std::uint64_t GgufFile::get_array_size(std::string_view key) const {
  const GgufValue& v = value(key);
  if (v.type() != GgufType::ARRAY) fail_expected(key_what(key), "type", "array", gguf_type_name(v.type()));
  return v.array_size();
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensor& GgufFile::tensor(std::string_view name) const {
  const GgufTensor* t = find_tensor(name);
  if (t == nullptr) throw Error(detail::concat("gguf: ", source_, ": tensor '", name, "' not found"));
  return *t;
}

std::vector<float> dequantize(const GgufTensor& tensor) {
  ggml_require_dequantizable(tensor.type, "tensor '" + tensor.name + "'");
  std::vector<float> out(static_cast<std::size_t>(tensor.n_elements));
  dequantize(tensor, out);
  return out;
}

void dequantize(const GgufTensor& tensor, std::span<float> out) {
  check_arg(out.size() == tensor.n_elements, "gguf: dequantize", "output size for tensor '" + tensor.name + "'",
            tensor.n_elements, out.size());
  ggml_dequantize(tensor.type, tensor.data, out, "tensor '" + tensor.name + "'");
}

}  // namespace ignis::model

// A library's machine code as text, through capstone, from the binary's own bytes.
//
// capstone is loaded on the first disassembly (dlopen), not linked: its 77k relocations cost every fxprof
// process ~7 ms and ~370 page faults at start-up (a tenth of an export of 100k samples), for what only the
// server's /asm/v1 uses.
#include <capstone/capstone.h>
#include <dlfcn.h>
#include <elf.h>

#include <algorithm>
#include <string_view>

#include "symbolizer/symbolizer_impl.h"

namespace fxprof::symbolizer {
namespace {

struct Capstone {
  decltype(&cs_open) open = nullptr;
  decltype(&cs_option) option = nullptr;
  decltype(&cs_malloc) malloc = nullptr;
  decltype(&cs_disasm_iter) disasm_iter = nullptr;
  decltype(&cs_free) free = nullptr;
  decltype(&cs_close) close = nullptr;
  std::string error;  // why it is not there ("" when loaded)
};

template <class F>
void bind(void* lib, const char* name, F& f, std::string& error) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  if (f == nullptr && error.empty()) error = std::string("capstone has no ") + name;
}

// Loaded once and kept for the process's life (never dlclose'd: nothing would gain from it).
const Capstone& capstone() {
  static const Capstone c = [] {
    Capstone c;
    void* lib = nullptr;
    for (const char* name : {FXPROF_CAPSTONE_SONAME, "libcapstone.so"})
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    if (lib == nullptr) {
      const char* e = dlerror();
      c.error = std::string("cannot load capstone (") + (e ? e : FXPROF_CAPSTONE_SONAME) + ")";
      return c;
    }
    bind(lib, "cs_open", c.open, c.error);
    bind(lib, "cs_option", c.option, c.error);
    bind(lib, "cs_malloc", c.malloc, c.error);
    bind(lib, "cs_disasm_iter", c.disasm_iter, c.error);
    bind(lib, "cs_free", c.free, c.error);
    bind(lib, "cs_close", c.close, c.error);
    return c;
  }();
  return c;
}

// The capstone architecture of an ELF machine, with its name and syntax in `out`; false: one we do not
// decode.
bool capstone_arch(uint16_t machine, Disassembly& out, cs_arch& arch, cs_mode& mode) {
  out.syntax = "Intel";
  switch (machine) {
    case EM_X86_64:
      arch = CS_ARCH_X86;
      mode = CS_MODE_64;
      out.arch = "x86_64";
      return true;
    case EM_386:
      arch = CS_ARCH_X86;
      mode = CS_MODE_32;
      out.arch = "x86";
      return true;
    case EM_AARCH64:
      arch = CS_ARCH_ARM64;
      mode = CS_MODE_ARM;
      out.arch = "aarch64";
      out.syntax = "ARM";
      return true;
    default:
      return false;
  }
}

// Decodes `bytes` (at `start`) into out.instructions; a byte that decodes to nothing is "(bad)" and skipped.
void decode_all(const Capstone& cs, csh handle, const std::vector<uint8_t>& bytes, uint64_t start,
                Disassembly& out) {
  cs_insn* insn = cs.malloc(handle);
  const uint8_t* code = bytes.data();
  size_t left = bytes.size();
  uint64_t addr = start;
  while (left > 0) {
    uint64_t before = addr;
    if (cs.disasm_iter(handle, &code, &left, &addr, insn)) {
      std::string text = insn->mnemonic;
      if (insn->op_str[0] != '\0') {
        text += ' ';
        text += insn->op_str;
      }
      out.instructions.emplace_back(before - start, std::move(text));
    } else {
      out.instructions.emplace_back(before - start, "(bad)");
      ++code;
      --left;
      addr = before + 1;
    }
  }
  cs.free(insn, 1);
}

}  // namespace

Answer<Disassembly> Symbolizer::disassemble(std::string_view debug_name, std::string_view breakpad_id,
                                            uint64_t start, uint64_t size, bool until_function_end) {
  size = std::min(size, kMaxDisassemblyBytes);
  auto handle = impl_->cache.get(debug_name, breakpad_id);
  if (!handle) return Refusal{Refusal::kNotFound, handle.error()};
  Library& l = *handle->lib;
  std::vector<uint8_t> bytes;
  uint16_t machine;
  {
    std::lock_guard<std::mutex> lock(l.mu);
    if (l.code == nullptr)
      return Refusal{Refusal::kNotFound, "the binary of " + std::string(debug_name) + " was not found"};
    if (until_function_end) {
      // The function's end as resolve() sees it: its symbol's, else (a stripped binary) its FDE's.
      uint64_t end = 0;
      if (const auto* s = l.symbols.find(start))
        end = l.symbols.end_of(s);
      else if (auto f = l.fde_range(start))
        end = f->end;
      if (end > start) size = std::max(size, std::min(end - start, kMaxDisassemblyBytes));
    }
    auto span = l.code->code_bytes(start + l.base_svma, size);
    bytes.assign(span.begin(), span.end());
    machine = l.code->machine();
  }
  impl_->cache.account(*handle);
  if (bytes.empty()) return Refusal{Refusal::kNotFound, "no code at that address"};
  Disassembly out;
  cs_arch arch;
  cs_mode mode;
  if (!capstone_arch(machine, out, arch, mode))
    return Refusal{Refusal::kUnsupported, "unsupported architecture for disassembly"};
  const Capstone& cs = capstone();
  if (!cs.error.empty()) return Refusal{Refusal::kUnsupported, cs.error};
  csh handle_cs;
  if (cs.open(arch, mode, &handle_cs) != CS_ERR_OK)
    return Refusal{Refusal::kUnsupported, "cannot start capstone"};
  if (arch == CS_ARCH_X86) cs.option(handle_cs, CS_OPT_SYNTAX, CS_OPT_SYNTAX_INTEL);
  out.size = bytes.size();
  decode_all(cs, handle_cs, bytes, start, out);
  cs.close(&handle_cs);
  return out;
}

namespace {

// Appends the calls and tail jumps of x86-64 `bytes` (the function [start, start + bytes.size())) to `out`:
// each jump or call whose operand is an immediate outside the function is a call (a jump inside is the
// function's own control flow); one through a register or memory is indirect.
void collect_calls(const Capstone& cs, csh handle, const std::vector<uint8_t>& bytes, uint64_t start,
                   FunctionCalls& out) {
  cs_insn* insn = cs.malloc(handle);
  const uint8_t* code = bytes.data();
  size_t left = bytes.size();
  uint64_t addr = start;
  const uint64_t end = start + bytes.size();
  while (left > 0) {
    if (!cs.disasm_iter(handle, &code, &left, &addr, insn)) {  // padding or data: skipped a byte at a time
      ++code;
      --left;
      ++addr;
      continue;
    }
    const cs_detail* d = insn->detail;
    if (d == nullptr) continue;
    bool branch = false;
    for (uint8_t g = 0; g < d->groups_count; ++g)
      branch |= d->groups[g] == CS_GRP_CALL || d->groups[g] == CS_GRP_JUMP;
    if (!branch || d->x86.op_count == 0) continue;
    const cs_x86_op& op = d->x86.operands[0];
    if (op.type != X86_OP_IMM) {
      ++out.indirect;
      continue;
    }
    const uint64_t target = static_cast<uint64_t>(op.imm);
    if (target >= start && target < end) continue;
    out.calls.push_back({target, {}});
  }
  cs.free(insn, 1);
}

}  // namespace

Answer<FunctionCalls> Symbolizer::function_calls(std::string_view debug_name, std::string_view breakpad_id,
                                                 uint64_t address, uint64_t max_size) {
  auto handle = impl_->cache.get(debug_name, breakpad_id);
  if (!handle) return Refusal{Refusal::kNotFound, handle.error()};
  Library& l = *handle->lib;
  FunctionCalls out;
  std::vector<uint8_t> bytes;
  {
    std::lock_guard<std::mutex> lock(l.mu);
    if (l.code == nullptr)
      return Refusal{Refusal::kNotFound, "the binary of " + std::string(debug_name) + " was not found"};
    if (l.code->machine() != EM_X86_64)
      return Refusal{Refusal::kUnsupported, "calls are read on x86-64 only"};
    if (const auto* s = l.symbols.find(address)) {
      out.start = s->start;
      out.size = l.symbols.end_of(s) - s->start;
    } else if (auto f = l.fde_range(address)) {
      out.start = f->start;
      out.size = f->end - f->start;
    } else {
      return Refusal{Refusal::kNotFound, "no function at that address"};
    }
    if (out.size > max_size) return Refusal{Refusal::kTooLarge, "the function is larger than asked"};
    auto span = l.code->code_bytes(out.start + l.base_svma, out.size);
    bytes.assign(span.begin(), span.end());
  }
  impl_->cache.account(*handle);
  if (bytes.size() != out.size) return Refusal{Refusal::kNotFound, "no code at that address"};
  const Capstone& cs = capstone();
  if (!cs.error.empty()) return Refusal{Refusal::kUnsupported, cs.error};
  csh handle_cs;
  if (cs.open(CS_ARCH_X86, CS_MODE_64, &handle_cs) != CS_ERR_OK)
    return Refusal{Refusal::kUnsupported, "cannot start capstone"};
  cs.option(handle_cs, CS_OPT_DETAIL, CS_OPT_ON);
  collect_calls(cs, handle_cs, bytes, out.start, out);
  cs.close(&handle_cs);
  // The names of the targets, as resolve() gives them (a PLT stub is "name@plt").
  std::vector<uint64_t> targets;
  for (const FunctionCalls::Call& c : out.calls) targets.push_back(c.target);
  auto named = resolve(debug_name, breakpad_id, targets);
  if (named)
    for (size_t i = 0; i < out.calls.size(); ++i)
      if (const auto& a = named->addresses[i]; a.found && a.function) out.calls[i].name = a.function->text;
  return out;
}

}  // namespace fxprof::symbolizer

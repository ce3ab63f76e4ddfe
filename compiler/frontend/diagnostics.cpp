#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "compiler/frontend/frontend.h"

namespace mxfp6::frontend {
namespace {

/// The text of 1-based line `line` of `text`, without its line terminator; empty when absent.
std::string_view lineOf(std::string_view text, int line) {
  size_t begin = 0;
  for (int i = 1; i < line; ++i) {
    size_t nl = text.find('\n', begin);
    if (nl == std::string_view::npos) return {};
    begin = nl + 1;
  }
  size_t end = text.find('\n', begin);
  std::string_view s = text.substr(begin, end == std::string_view::npos ? end : end - begin);
  if (!s.empty() && s.back() == '\r') s.remove_suffix(1);
  return s;
}

}  // namespace

void DiagnosticEngine::error(const kir::SourceLoc& loc, std::string message) {
  diags_.push_back({loc, std::move(message)});
}

void DiagnosticEngine::addSource(const std::string& file, const std::string& text) {
  sources_[file] = text;
}

void DiagnosticEngine::renderOne(const kir::SourceLoc& loc, std::string_view kind,
                                 const std::string& message, std::string& out) const {
  out += loc.file;
  if (loc.line > 0) out += ":" + std::to_string(loc.line) + ":" + std::to_string(loc.col);
  out += ": ";
  out += kind;
  out += ": " + message + "\n";
  auto source = sources_.find(loc.file);
  if (loc.line <= 0 || source == sources_.end()) return;
  std::string_view line = lineOf(source->second, loc.line);
  out.append(line);
  out += "\n";
  // Tabs are copied so the caret lines up however the terminal expands them.
  for (int i = 0; i + 1 < loc.col; ++i)
    out += i < static_cast<int>(line.size()) && line[i] == '\t' ? '\t' : ' ';
  out += "^\n";
}

std::string DiagnosticEngine::annotate(const std::string& text) const {
  std::string out;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + begin, end - begin);
    begin = end + 1;
    // "file:line:col: kind: message", the file one this engine has the source of.
    size_t kindAt = std::string_view::npos;
    for (std::string_view kind : {": error: ", ": note: "})
      kindAt = std::min(kindAt, line.find(kind));
    kir::SourceLoc loc;
    if (kindAt != std::string_view::npos) {
      std::string_view where = line.substr(0, kindAt);
      size_t c2 = where.rfind(':');
      size_t c1 = c2 == std::string_view::npos || c2 == 0 ? std::string_view::npos : where.rfind(':', c2 - 1);
      if (c1 != std::string_view::npos) {
        loc.file = std::string(where.substr(0, c1));
        loc.line = std::atoi(std::string(where.substr(c1 + 1, c2 - c1 - 1)).c_str());
        loc.col = std::atoi(std::string(where.substr(c2 + 1)).c_str());
      }
    }
    if (loc.line <= 0 || !sources_.count(loc.file)) {
      out.append(line);
      out += "\n";
      continue;
    }
    std::string_view rest = line.substr(kindAt + 2);
    size_t colon = rest.find(": ");
    renderOne(loc, rest.substr(0, colon), std::string(rest.substr(colon + 2)), out);
  }
  return out;
}

std::string DiagnosticEngine::render() const {
  std::string out;
  for (const Diagnostic& d : diags_) {
    renderOne(d.loc, "error", d.message, out);
    // An error inside a fn's body: the calls that expanded it there, innermost first.
    for (const kir::FnCall* call = d.loc.inCall.get(); call; call = call->loc.inCall.get())
      renderOne(call->loc, "note", "in the call of fn '" + call->fn + "'", out);
  }
  return out;
}

}  // namespace mxfp6::frontend

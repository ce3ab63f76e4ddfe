#include "tools/mxfp6c/pin.h"

#include <cstdlib>
#include <iostream>
#include <regex>

#include "autotune/db.h"
#include "autotune/key_text.h"

namespace mxfp6::cli {

int pinCommand(const std::string& command, const std::vector<std::string>& positional,
               const std::map<std::string, std::string>& flags) {
  auto flag = [&](const char* name) -> std::string {
    auto it = flags.find(name);
    return it == flags.end() ? "" : it->second;
  };
  auto fail = [](int code, const std::string& message) {
    std::cerr << "mxfp6c: error: " << message << "\n";
    return code;
  };
  if (positional.size() != 1 || flag("--db").empty())
    return fail(2, command + " takes one KEY (op/variant/target/sizes/M) and --db DB");
  bool pinning = command == "pin";
  if (pinning && flag("--why").empty()) return fail(2, "a pin needs --why TEXT: the reason is its provenance");
  if (pinning && flag("--plan").empty() == flag("--config").empty())
    return fail(2, "name the pinned plan with exactly one of --plan ID or --config K=V,...");
  std::string expires = flag("--expires");
  if (!expires.empty() && !std::regex_match(expires, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")))
    return fail(2, "--expires must be UTC ISO 8601, e.g. 2027-01-31T00:00:00Z, got '" + expires + "'");

  auto db = autotune::KernelDb::open(flag("--db"));
  if (!db) return fail(1, db.status().message());
  std::optional<std::string> toolchain;
  if (flags.count("--toolchain")) toolchain = flag("--toolchain");
  autotune::KeyTextError keyError;
  auto key = autotune::parseKeyText(**db, positional[0], toolchain, keyError);
  if (!key) return fail(keyError.usage ? 2 : 1, key.status().message());
  if (!pinning) {
    Status s = (*db)->unpin(*key);
    if (!s) return fail(1, s.message());
    std::cout << "unpinned " << autotune::formatKey(*key) << "\n";
    return 0;
  }
  auto candidate = autotune::findCandidate(**db, key->family, flag("--plan"), flag("--config"));
  if (!candidate) return fail(1, autotune::formatKey(*key) + ": " + candidate.status().message());
  std::string who = flag("--who");
  if (who.empty()) who = std::getenv("USER") ? std::getenv("USER") : "unknown";
  autotune::Pin pin{*key, candidate->planId, who, flag("--why"), "", std::nullopt};
  if (!expires.empty()) pin.expiresAt = expires;
  Status s = (*db)->pin(pin);
  if (!s) return fail(1, s.message());
  std::cout << "pinned " << autotune::formatKey(*key) << " to " << candidate->planId << "\n";
  return 0;
}

}  // namespace mxfp6::cli

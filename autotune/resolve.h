// Resolution: which plan runs a key, and why (docs/architecture.md, "Resolution"). In order:
//   pinned   a pin on the exact key (not expired)
//   exact    the key's tuned selection
//   nearest  the selection of the same family (op, variant, target, sizes, toolchain) at the
//            nearest M on a log scale (ties: the smaller M), if its plan applies to this M
//   default  the op's default plan as precompiled for the family
// nearest and default record a miss, so the key can be tuned later. Never a silent decline:
// every answer says which rule gave it, and a family with nothing precompiled is an error that
// says what to run.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "autotune/db.h"
#include "ops/plan.h"

namespace mxfp6::autotune {

enum class Rule { Pinned, Exact, Nearest, Default };
const char* ruleName(Rule rule);

struct Resolution {
  Key key;
  Rule rule = Rule::Default;
  std::optional<int64_t> fromRows;  // nearest: the M whose selection answered
  ops::Plan plan;                   // its launches carry their code objects' sha256
  std::vector<CodeObject> objects;  // in launch order (bytes verified); empty without bytes
  std::string why;                  // one line: the rule and what it found
};

struct ResolveOptions {
  bool recordMiss = true;    // false for read-only databases and for `why`
  bool withObjects = true;   // read and verify the code objects' bytes
};

Expected<Resolution> resolve(KernelDb& db, const Key& key, const ResolveOptions& options = {});

}  // namespace mxfp6::autotune

// `mxfp6c fetch`: what a training process does at startup, from the command line: resolve a
// shape set's keys through the client library (one BatchResolve), fill the node cache, and
// report what resolved how (docs/architecture.md, "The service").
#pragma once

#include <map>
#include <string>

namespace mxfp6::cli {

/// --server HOST:PORT[,HOST:PORT...] | --db DB (embedded), --shapes FILE, [--target T] (default
/// sm_90), [--cache DIR], [--fresh-for SECONDS] (node-cache answers younger than that are used
/// without asking), [--deadline-ms N]. Exit: 0 every key resolved, 1 an error or a key
/// that did not resolve, 2 usage.
int fetchCommand(const std::map<std::string, std::string>& flags);

}  // namespace mxfp6::cli

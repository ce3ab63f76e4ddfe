// A real mxfp6-server as a child process on a loopback port the kernel picks, for tests: started
// with its command line, its port read from its "listening on" line, stopped by signal.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace mxfp6::testing {

class ServerProcess {
 public:
  /// Starts `MXFP6_SERVER --db db --listen 127.0.0.1:0 extra...`; stderr (the request log) goes
  /// to `logPath`. address() is empty when it did not come up.
  ServerProcess(const std::string& db, std::vector<std::string> extra, const std::string& logPath) {
    int out[2];
    if (pipe(out) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      FILE* log = std::fopen(logPath.c_str(), "a");
      if (log) dup2(fileno(log), STDERR_FILENO);
      close(out[0]);
      std::vector<std::string> args = {MXFP6_SERVER, "--db", db, "--listen", "127.0.0.1:0"};
      args.insert(args.end(), extra.begin(), extra.end());
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(MXFP6_SERVER, argv.data());
      _exit(127);
    }
    close(out[1]);
    // The first line says where it listens.
    std::string line;
    char c;
    while (read(out[0], &c, 1) == 1 && c != '\n') line += c;
    close(out[0]);
    auto at = line.find("listening on ");
    if (at != std::string::npos) address_ = line.substr(at + 13, line.find(' ', at + 13) - at - 13);
  }
  ~ServerProcess() { stop(SIGKILL); }

  const std::string& address() const { return address_; }
  pid_t pid() const { return pid_; }

  /// Sends `signal` and waits; the exit status (128 + signal when killed by it).
  int stop(int signal = SIGTERM) {
    if (pid_ <= 0) return -1;
    kill(pid_, signal);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
  std::string address_;
};

}  // namespace mxfp6::testing

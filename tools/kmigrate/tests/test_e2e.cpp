// SPDX-License-Identifier: GPL-2.0-only
//
// The test programs end to end on one host, kmigrate.ko replaced by
// fake_kernel.cpp (preloaded): run() with its re-execution, the arena,
// migrate() from deep in the arena's stack, the source's exit, a new
// process adopting the arena with its own canary and stack, and the
// refusals.  Paths come from meson in the environment.
#include <gtest/gtest.h>

#include <kverbs/kmigrate.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

namespace {

std::string env(const char *name)
{
    const char *v = std::getenv(name);
    return v ? v : "";
}

struct result {
    int status = -1;     // the first process's wait status
    std::string out;     // stdout and stderr of every process of the chain
};

class spool_dir {
public:
    spool_dir()
    {
        char tmpl[] = "/tmp/kmigrate-e2e.XXXXXX";
        if (!::mkdtemp(tmpl))
            throw std::runtime_error("mkdtemp");
        path_ = tmpl;
    }
    ~spool_dir() { std::filesystem::remove_all(path_); }
    const std::string &path() const { return path_; }

private:
    std::string path_;
};

struct started {
    pid_t pid;
    int out;  // read end of its stdout and stderr
};

// Start a program under the fake kernel.
started start(const std::string &dir, std::vector<std::string> args,
              const std::vector<std::pair<std::string, std::string>> &extra)
{
    int p[2];
    if (::pipe2(p, O_CLOEXEC) < 0)
        throw std::runtime_error("pipe");
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::dup2(p[1], 1);
        ::dup2(p[1], 2);
        ::close_range(3, ~0U, 0);  // whatever the test inherited would refuse migrate()
        ::setenv("LD_PRELOAD", env("KMIGRATE_FAKE").c_str(), 1);
        ::setenv("KMIGRATE_FAKE_DIR", dir.c_str(), 1);
        ::setenv("KMIGRATE_VERBOSE", "1", 1);
        ::unsetenv("KMIGRATE_INCOMING");
        for (const auto &[k, v] : extra)
            ::setenv(k.c_str(), v.c_str(), 1);
        std::vector<char *> argv;
        for (auto &a : args)
            argv.push_back(a.data());
        argv.push_back(nullptr);
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    ::close(p[1]);
    return {pid, p[0]};
}

// Collect the output of a started program and of every process it
// migrates to, until all have closed it; then wait for the program.
result collect(started s, const std::function<void(const std::string &)> &watch = {})
{
    const pid_t pid = s.pid;
    const int fd = s.out;
    result r;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    for (;;) {
        pollfd pfd{fd, POLLIN, 0};
        if (::poll(&pfd, 1, 100) > 0) {
            char buf[4096];
            const ssize_t n = ::read(fd, buf, sizeof(buf));
            if (n <= 0)
                break;
            r.out.append(buf, static_cast<std::size_t>(n));
            if (watch)
                watch(r.out);
        }
        if (std::chrono::steady_clock::now() > deadline) {
            r.out += "\n[test: timed out]\n";
            ::kill(pid, SIGKILL);
            break;
        }
    }
    ::close(fd);
    ::waitpid(pid, &r.status, 0);
    return r;
}

result run(const std::string &dir, std::vector<std::string> args,
           const std::vector<std::pair<std::string, std::string>> &extra = {},
           const std::function<void(const std::string &)> &watch = {})
{
    return collect(start(dir, std::move(args), extra), watch);
}

std::string field(const std::string &out, const std::string &re)
{
    std::smatch m;
    return std::regex_search(out, m, std::regex(re)) ? m[1].str() : "";
}

bool exited_ok(int status)
{
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

class EndToEnd : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (env("KMIGRATE_FAKE").empty() || env("KMIGRATE_SUM").empty())
            GTEST_SKIP() << "run through meson test: the programs' paths are not set";
    }
    spool_dir dir;
};

TEST_F(EndToEnd, TwoHopsKeepEveryByte)
{
    const result r = run(dir.path(), {env("KMIGRATE_SUM"), "--mb", "24", "--to",
                                      "127.0.0.1,[::1]:18901"});
    SCOPED_TRACE(r.out);
    EXPECT_TRUE(exited_ok(r.status));
    const std::string before = field(r.out, "kmigrate-sum: before sum=([0-9a-f]+) ");
    ASSERT_FALSE(before.empty());
    EXPECT_NE(r.out.find("kmigrate-sum: hop 1 ret=0 "), std::string::npos);
    EXPECT_NE(r.out.find("kmigrate-sum: hop 2 ret=0 "), std::string::npos);
    EXPECT_EQ(field(r.out, "kmigrate-sum: after sum=([0-9a-f]+) ok=1 "), before);
    EXPECT_NE(r.out.find("kmigrate: moved to 127.0.0.1:18900\n"), std::string::npos);
    EXPECT_NE(r.out.find("kmigrate: moved to [::1]:18901\n"), std::string::npos);
    EXPECT_EQ(std::filesystem::is_empty(dir.path()), true);  // every spool taken

    // the sum depends on the data only: another run, other arguments
    const result again = run(dir.path(), {env("KMIGRATE_SUM"), "--mb", "24"});
    EXPECT_EQ(field(again.out, "kmigrate-sum: before sum=([0-9a-f]+) "), before);
    EXPECT_EQ(field(again.out, "kmigrate-sum: after sum=([0-9a-f]+) ok=1 "), before);
}

TEST_F(EndToEnd, StackProtectedProgramCrossesProcesses)
{
    // every function of the program and of libkmigrate checks its canary;
    // the destination's process has a canary of its own
    const result r = run(dir.path(), {env("KMIGRATE_SUM_SSP"), "--mb", "4", "--to",
                                      "127.0.0.1,127.0.0.1,127.0.0.1", "--precopy"});
    SCOPED_TRACE(r.out);
    EXPECT_EQ(r.out.find("stack smashing"), std::string::npos);
    EXPECT_NE(r.out.find("kmigrate-sum: hop 3 ret=0 "), std::string::npos);
    EXPECT_NE(r.out.find(" ok=1 "), std::string::npos);
}

TEST_F(EndToEnd, FailedMigrationResumesTheSource)
{
    const result r = run(dir.path(), {env("KMIGRATE_SUM"), "--mb", "4", "--to", "127.0.0.1"},
                         {{"KMIGRATE_FAKE_FAIL", std::to_string(EHOSTDOWN)}});
    SCOPED_TRACE(r.out);
    EXPECT_TRUE(exited_ok(r.status));
    EXPECT_NE(r.out.find("kmigrate-sum: hop 1 ret=-" + std::to_string(EHOSTDOWN) + " "),
              std::string::npos);
    EXPECT_NE(r.out.find("failed after the freeze"), std::string::npos);
    EXPECT_NE(r.out.find(" ok=1 "), std::string::npos);
    EXPECT_EQ(r.out.find("moved to"), std::string::npos);
}

TEST_F(EndToEnd, MoveRequestedFromOutside)
{
    bool sent = false;
    const std::string d = dir.path();
    const result r = run(dir.path(), {env("KMIGRATE_SUM"), "--mb", "4", "--wait-move"}, {},
                         [&](const std::string &out) {
                             const std::string pid = field(out, "waiting pid=([0-9]+) ");
                             if (sent || pid.empty())
                                 return;
                             // what kmigrate move has the kernel keep for the process
                             kmigrate_move mv{};
                             auto *in = reinterpret_cast<sockaddr_in *>(&mv.dest);
                             in->sin_family = AF_INET;
                             in->sin_port = htons(18902);
                             inet_pton(AF_INET, "127.0.0.1", &in->sin_addr);
                             std::ofstream(d + "/move-" + pid, std::ios::binary)
                                 .write(reinterpret_cast<const char *>(&mv), sizeof(mv));
                             ::kill(std::stoi(pid), KMIGRATE_SIGNAL);
                             sent = true;
                         });
    SCOPED_TRACE(r.out);
    EXPECT_TRUE(sent);
    EXPECT_NE(r.out.find("kmigrate: moved to 127.0.0.1:18902\n"), std::string::npos);
    EXPECT_NE(r.out.find("kmigrate-sum: hop 1 ret=0 "), std::string::npos);
    EXPECT_NE(r.out.find(" ok=1 "), std::string::npos);
}

TEST_F(EndToEnd, OpenFileRefused)
{
    const result r = run(dir.path(), {env("KMIGRATE_FD")});
    SCOPED_TRACE(r.out);
    EXPECT_TRUE(exited_ok(r.status));
    EXPECT_TRUE(std::regex_search(
        r.out, std::regex("kmigrate-fd: ret=-9 error=fd [0-9]+ \\(/tmp/kmigrate-fd\\.[^)]+\\) is "
                          "open: file descriptors do not migrate")));
}

TEST_F(EndToEnd, ThreadRefused)
{
    const result r = run(dir.path(), {env("KMIGRATE_THREAD")});
    SCOPED_TRACE(r.out);
    EXPECT_TRUE(exited_ok(r.status));
    EXPECT_NE(r.out.find("kmigrate-thread: ret=-16 error=another thread runs (thread "),
              std::string::npos);
}

TEST_F(EndToEnd, ServeStartsTheDestination)
{
    if (env("KMIGRATE_CLI").empty())
        GTEST_SKIP() << "KMIGRATE_CLI not set";
    const std::string logs = dir.path() + "/logs/deeper";
    const std::string policy = dir.path() + "/policy.conf";
    std::ofstream(policy) << "accept 127.0.0.0/8 user " << ::getuid() << ":" << ::getgid()
                          << " exec /nowhere "
                          << std::filesystem::canonical(env("KMIGRATE_SUM")).string() << "\n";
    const started serve = start(dir.path(), {env("KMIGRATE_CLI"), "serve", "--log-dir", logs,
                                             "--policy", policy, "--once", "--allow-root"},
                                {});
    const result src = run(dir.path(), {env("KMIGRATE_SUM"), "--mb", "4", "--to", "127.0.0.1"},
                           {{"KMIGRATE_FAKE_SERVE", "1"}});
    SCOPED_TRACE(src.out);
    EXPECT_TRUE(exited_ok(src.status));  // the source's copy is gone
    EXPECT_NE(src.out.find("kmigrate: moved to 127.0.0.1:18900\n"), std::string::npos);
    EXPECT_EQ(src.out.find("hop 1"), std::string::npos);
    const result srv = collect(serve);
    SCOPED_TRACE(srv.out);
    EXPECT_TRUE(exited_ok(srv.status));
    const std::string id = field(srv.out, "id ([0-9]+) pid [0-9]+ started /");
    ASSERT_FALSE(id.empty());
    EXPECT_TRUE(std::regex_search(srv.out, std::regex("id " + id + " pid [0-9]+ exited status 0")));
    EXPECT_TRUE(std::regex_search(srv.out, std::regex("id " + id + " pid [0-9]+ started .* from "
                                                      "127\\.0\\.0\\.1.* as uid " +
                                                      std::to_string(::getuid()) + " ")));
    std::ifstream f(logs + "/" + id + ".log");
    const std::string log((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    SCOPED_TRACE(log);
    EXPECT_NE(log.find("kmigrate-sum: hop 1 ret=0 "), std::string::npos);
    EXPECT_EQ(field(log, "after sum=([0-9a-f]+) ok=1 "),
              field(src.out, "before sum=([0-9a-f]+) "));
}

// Issue 25, finding 1: a source named the program, and its uid and gid,
// and the spawner ran it.  Now only the destination's policy decides.
TEST_F(EndToEnd, ServeRefusesWhatNoRuleAllows)
{
    if (env("KMIGRATE_CLI").empty())
        GTEST_SKIP() << "KMIGRATE_CLI not set";
    const std::string policy = dir.path() + "/policy.conf";
    // the right program from another network, and another program from
    // the right one
    std::ofstream(policy) << "accept 10.9.0.0/16 user " << ::getuid() << ":" << ::getgid()
                          << " exec " << std::filesystem::canonical(env("KMIGRATE_SUM")).string()
                          << "\n"
                          << "accept 127.0.0.1 user " << ::getuid() << ":" << ::getgid()
                          << " exec /usr/bin/true\n";
    for (const std::string &p : {policy, dir.path() + "/no-such-policy"}) {
        const started serve = start(dir.path(), {env("KMIGRATE_CLI"), "serve", "--log-dir",
                                                 dir.path() + "/logs", "--policy", p, "--once",
                                                 "--allow-root"},
                                    {});
        const result src = run(dir.path(), {env("KMIGRATE_SUM"), "--mb", "4", "--to",
                                            "127.0.0.1"},
                               {{"KMIGRATE_FAKE_SERVE", "1"}});
        const result srv = collect(serve);
        SCOPED_TRACE(srv.out);
        EXPECT_FALSE(exited_ok(srv.status));
        EXPECT_NE(srv.out.find(" refused: no rule of " + p + " lets 127.0.0.1"),
                  std::string::npos);
        EXPECT_EQ(srv.out.find(" started "), std::string::npos);
    }
}

TEST_F(EndToEnd, DifferentProgramCannotAttach)
{
    const result r = run(dir.path(), {env("KMIGRATE_SUM"), "--mb", "4", "--to", "127.0.0.1"},
                         {{"KMIGRATE_FAKE_BAD_FP", "1"}});
    SCOPED_TRACE(r.out);
    EXPECT_NE(r.out.find("fingerprint mismatch"), std::string::npos);
    EXPECT_EQ(r.out.find("after sum="), std::string::npos);
}

}  // namespace

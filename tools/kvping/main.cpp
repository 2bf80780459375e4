// SPDX-License-Identifier: GPL-2.0-only
//
// kvping: user-space client of the kping sample (samples/kping).  Connects
// over rdma_cm with kverbs private data, checks the server's announcement,
// then runs ping-pongs, verifying every echo.
//
// Exit status: 0 all round trips verified; 3 the peer rejected the connection
// (the kverbs reason is printed when the reject carries one); 1 anything else,
// including usage errors.
#include "args.hpp"
#include "rdma.hpp"

#include <kvcli/kvcli.hpp>
#include <kvwire/auth.hpp>
#include <kvwire/cm.hpp>
#include <kvwire/kvmsg.hpp>
#include <kvwire/kping.hpp>

#include <getopt.h>
#include <netdb.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>
#include <utility>

namespace {

using namespace std::chrono_literals;
using kvping::Error;

constexpr int exit_ok = 0;
constexpr int exit_fail = 1;
constexpr int exit_rejected = 3;
constexpr int exit_peer_closed = 4;

// Thrown when the peer closed the connection as --bad-msg expects.
struct PeerClosed {};

struct Options {
    std::string server;
    std::string port = "18515";
    std::uint32_t count = 1000;
    std::uint32_t size = 64;           // whole message, header included, like kping.ko
    std::uint32_t node_id = 2;
    std::uint16_t depth = 16;          // receives we post, each max_msg bytes
    std::uint32_t max_msg = 4096;
    std::uint8_t initiator_depth = 0;  // RDMA READ/atomic depths we offer (we issue none)
    std::uint8_t responder_resources = 0;
    std::string bad;                   // empty: announce valid private data
    std::string bad_msg;               // empty: send valid kvmsg headers
    std::chrono::milliseconds timeout = 10000ms;
    std::chrono::milliseconds withhold = 0ms;  // > 0: keep the peer's credits this long
    std::vector<std::uint8_t> key;     // --key-file: authenticate with this secret
};

void usage(std::FILE *out)
{
    std::fprintf(out,
        "usage: kvping --server-addr ADDR [options]\n"
        "  --server-addr ADDR  kping server (IPv4/IPv6 address or name)\n"
        "  --port PORT         rdma_cm port (default 18515)\n"
        "  --count N           round trips (default 1000)\n"
        "  --size BYTES        message size, %zu-byte header included (default 64)\n"
        "  --node-id N         our node id (default 2)\n"
        "  --depth D           receive buffers we post and announce (default 16)\n"
        "  --max-msg M         largest message we accept (default 4096)\n"
        "  --rd-atomic I[/R]   RDMA READ/atomic depths we offer: I as initiator, R as\n"
        "                      responder (default 0; R defaults to I); the peer's\n"
        "                      answer is printed from our side\n"
        "  --bad KIND          announce malformed private data, to test the peer's\n"
        "                      validation: magic|version|flags|reserved|node|depth|msg|short\n"
        "                      (short sends 8 bytes; IB/RoCE CMs zero-pad it, so the\n"
        "                      peer sees node id 0)\n"
        "  --bad-msg KIND      send one ping with a malformed kvmsg header and expect\n"
        "                      the peer to close the connection:\n"
        "                      type|flags|reserved|len|credits|seq|short; or offer\n"
        "                      authentication without the key and then send a ping\n"
        "                      instead of the proof (noproof), or nothing (silent);\n"
        "                      or connect validly and send nothing (idle)\n"
        "  --timeout-ms T      limit for every wait (default 10000)\n"
        "  --key-file F        authenticate with the secret in F (the logon key's\n"
        "                      payload, 16 to 64 bytes): prove it, check the server's\n"
        "                      proof, then go on as asked\n"
        "  --withhold-ms T     a peer that keeps the server's credits: send pings while\n"
        "                      credits last, never re-post a receive or grant one, for\n"
        "                      T ms, then close\n"
        "  -h, --help; -V, --version\n"
        "exit status: 0 ok, 2 usage error, 3 rejected by the peer, 4 the peer closed the\n"
        "connection after --bad-msg, 1 any other failure\n",
        kvwire::kping_header);
}

// --bad-msg noproof and silent offer authentication without the key.
bool offers_auth(const Options &o)
{
    return o.bad_msg == "noproof" || o.bad_msg == "silent";
}

// The private data we connect with: valid, or broken in exactly one way.
// With a key, @nonce is the request's.
std::vector<std::uint8_t> announcement(const Options &o, kvwire::Nonce *nonce = nullptr)
{
    auto p = kvwire::make_priv(o.node_id, o.depth, o.max_msg);
    std::size_t len = kvwire::priv_size;
    if (o.bad.empty()) {
    } else if (o.bad == "magic") {
        p.magic = 0xdeadbeefU;
    } else if (o.bad == "version") {
        p.version = KVERBS_CM_VERSION + 1;
    } else if (o.bad == "flags") {
        p.flags = 2;  // bit 0 is KVERBS_CM_F_AUTH
    } else if (o.bad == "reserved") {
        p.reserved = 1;
    } else if (o.bad == "node") {
        p.node_id = 0;
    } else if (o.bad == "depth") {
        p.depth = 0;
    } else if (o.bad == "msg") {
        p.max_msg = KVERBS_CM_MAX_MSG + 1;
    } else if (o.bad == "short") {
        len = 8;
    } else {
        throw Error("--bad: unknown kind '" + o.bad + "' (see --help)");
    }
    const auto bytes = kvwire::encode(p);
    std::vector<std::uint8_t> out(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(len));
    if (offers_auth(o) || !o.key.empty()) {
        // An authentication offer: a fresh nonce, a zero proof; without
        // the key (--bad-msg noproof, silent), no proof follows.
        out[offsetof(kverbs_cm_priv, flags) + 1] |= KVERBS_CM_F_AUTH;
        std::array<std::uint8_t, sizeof(kverbs_cm_auth)> auth{};
        std::random_device rd;
        for (std::size_t i = 0; i < KVERBS_CM_NONCE_LEN; ++i)
            auth[i] = static_cast<std::uint8_t>(rd());
        if (nonce)
            std::copy_n(auth.begin(), KVERBS_CM_NONCE_LEN, nonce->begin());
        out.insert(out.end(), auth.begin(), auth.end());
    }
    return out;
}

// The secret of --key-file, as the logon key holds it (16 to 64 bytes).
std::vector<std::uint8_t> read_key(std::string_view path)
{
    std::ifstream f{std::string(path), std::ios::binary};
    if (!f)
        throw Error("--key-file: cannot read " + std::string(path));
    std::vector<std::uint8_t> key{std::istreambuf_iterator<char>(f), {}};
    if (key.size() < 16 || key.size() > 64)
        throw Error("--key-file: the secret has " + std::to_string(key.size()) +
                    " bytes, not 16 to 64");
    return key;
}

Options parse_args(int argc, char **argv)
{
    enum { o_addr = 256, o_port, o_count, o_size, o_node, o_depth, o_max_msg, o_bad, o_bad_msg,
           o_timeout, o_rd_atomic, o_withhold, o_key_file };
    static const option longopts[] = {
        {"server-addr", required_argument, nullptr, o_addr},
        {"port", required_argument, nullptr, o_port},
        {"count", required_argument, nullptr, o_count},
        {"size", required_argument, nullptr, o_size},
        {"node-id", required_argument, nullptr, o_node},
        {"depth", required_argument, nullptr, o_depth},
        {"max-msg", required_argument, nullptr, o_max_msg},
        {"rd-atomic", required_argument, nullptr, o_rd_atomic},
        {"bad", required_argument, nullptr, o_bad},
        {"bad-msg", required_argument, nullptr, o_bad_msg},
        {"timeout-ms", required_argument, nullptr, o_timeout},
        {"withhold-ms", required_argument, nullptr, o_withhold},
        {"key-file", required_argument, nullptr, o_key_file},
        {"help", no_argument, nullptr, 'h'},
        {"version", no_argument, nullptr, 'V'},
        {nullptr, 0, nullptr, 0},
    };
    constexpr auto u32max = std::numeric_limits<std::uint32_t>::max();
    Options o;
    int c = 0;
    while ((c = getopt_long(argc, argv, "hV", longopts, nullptr)) != -1) {
        const std::string_view arg = optarg != nullptr ? optarg : "";
        switch (c) {
        case o_addr: o.server = arg; break;
        case o_port: o.port = std::to_string(kvping::parse_num<std::uint16_t>("--port", arg, 1, 65535)); break;
        case o_count: o.count = kvping::parse_num<std::uint32_t>("--count", arg, 1, u32max); break;
        case o_size: o.size = kvping::parse_num<std::uint32_t>("--size", arg, kvwire::kping_header, KVERBS_CM_MAX_MSG); break;
        case o_node: o.node_id = kvping::parse_num<std::uint32_t>("--node-id", arg, 1, u32max); break;
        case o_depth: o.depth = kvping::parse_num<std::uint16_t>("--depth", arg, KVERBS_CM_MIN_DEPTH, KVERBS_CM_MAX_DEPTH); break;
        case o_max_msg: o.max_msg = kvping::parse_num<std::uint32_t>("--max-msg", arg, KVERBS_CM_MIN_MSG, KVERBS_CM_MAX_MSG); break;
        case o_rd_atomic: {
            const auto slash = arg.find('/');
            o.initiator_depth = kvping::parse_num<std::uint8_t>("--rd-atomic", arg.substr(0, slash), 0, 16);
            o.responder_resources = slash == std::string_view::npos
                ? o.initiator_depth
                : kvping::parse_num<std::uint8_t>("--rd-atomic", arg.substr(slash + 1), 0, 16);
            break;
        }
        case o_bad: o.bad = arg; break;
        case o_bad_msg: o.bad_msg = arg; break;
        case o_timeout: o.timeout = std::chrono::milliseconds(kvping::parse_num<std::uint32_t>("--timeout-ms", arg, 1, 3600000)); break;
        case o_key_file: o.key = read_key(arg); break;
        case o_withhold: o.withhold = std::chrono::milliseconds(kvping::parse_num<std::uint32_t>("--withhold-ms", arg, 1, 3600000)); break;
        case 'h': usage(stdout); std::exit(exit_ok);
        case 'V': std::printf("kvping (kverbs) %s\n", KVERBS_VERSION); std::exit(exit_ok);
        default: usage(stderr); std::exit(kvcli::exit_usage);
        }
    }
    if (optind != argc)
        throw Error(std::string("unexpected argument '") + argv[optind] + "'");
    if (o.server.empty())
        throw Error("--server-addr is required (see --help)");
    static_cast<void>(announcement(o));  // rejects an unknown --bad kind now
    static constexpr std::string_view bad_msgs[] = {"", "noproof", "silent", "idle", "type", "flags", "reserved", "len",
                                                    "credits", "seq", "short"};
    if (std::ranges::find(bad_msgs, o.bad_msg) == std::end(bad_msgs))
        throw Error("--bad-msg: unknown kind '" + o.bad_msg + "' (see --help)");
    if (!o.key.empty() && offers_auth(o))
        throw Error("--key-file proves the key; --bad-msg " + o.bad_msg + " offers without it");
    if (o.size > o.max_msg)
        throw Error("--size " + std::to_string(o.size) + " exceeds our --max-msg " +
                    std::to_string(o.max_msg) + ", so the echo would not fit");
    return o;
}

struct AddrInfoDeleter {
    void operator()(addrinfo *ai) const noexcept { freeaddrinfo(ai); }
};

std::unique_ptr<addrinfo, AddrInfoDeleter> resolve(const Options &o)
{
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo *res = nullptr;
    if (const int err = getaddrinfo(o.server.c_str(), o.port.c_str(), &hints, &res); err != 0)
        throw Error("cannot resolve '" + o.server + "': " + gai_strerror(err));
    return std::unique_ptr<addrinfo, AddrInfoDeleter>(res);
}

void expect_event(const kvping::CmEvent &ev, rdma_cm_event_type want)
{
    if (ev->event != want)
        throw Error(std::string("expected ") + rdma_event_str(want) + ", got " +
                    rdma_event_str(ev->event) + " (status " + std::to_string(ev->status) + ")");
}

std::span<const std::uint8_t> private_data(const rdma_cm_event &ev)
{
    if (ev.param.conn.private_data == nullptr)
        return {};
    return {static_cast<const std::uint8_t *>(ev.param.conn.private_data),
            ev.param.conn.private_data_len};
}

// One client connection.  Members are in dependency order; see rdma.hpp.
class Client {
public:
    explicit Client(Options o) : opt_(std::move(o)) {}

    // Returns the exit status; throws Error on failure.
    int run()
    {
        if (!connect())
            return exit_rejected;
        ping_pong();
        return exit_ok;
    }

private:
    static constexpr std::uint64_t send_wr_id = std::numeric_limits<std::uint64_t>::max();

    bool connect();
    void setup_verbs();
    void post_recv(std::size_t slot);
    void ping_pong();
    void withhold();
    std::pair<std::span<const std::uint8_t>, kvwire::KvmsgParse> received_message(const ibv_wc &wc);
    void send_ping(std::uint32_t seq);
    void post_send(std::uint32_t len);
    void authenticate(std::span<const std::uint8_t> rep);
    void send_proof(const kvwire::Proof &proof);
    void expect_close();
    [[nodiscard]] std::size_t slot_size() const noexcept
    {
        return kvwire::kvmsg_header + opt_.max_msg;
    }

    Options opt_;
    // Buffers outlive the MRs that register them.
    std::vector<std::uint8_t> send_buf_;
    std::vector<std::uint8_t> recv_buf_;  // depth slots of max_msg bytes
    kvping::EventChannel ch_;
    kvping::CmId id_;
    kvping::Pd pd_;
    kvping::CompChannel cc_;
    kvping::Cq cq_;
    kvping::Mr send_mr_;
    kvping::Mr recv_mr_;
    kvping::Qp qp_;
    kvping::Connection conn_;
    std::uint32_t peer_max_msg_ = 0;
    // kvmsg state: credits toward the peer and both sequence numbers.
    kvwire::KvmsgCredits credits_{0};
    kvwire::AuthInput auth_;           // with --key-file: both sides' view
    std::uint32_t tx_seq_ = 0;
    std::uint32_t rx_seq_ = 0;
};

bool Client::connect()
{
    ch_.reset(rdma_create_event_channel());
    if (!ch_)
        kvping::throw_errno("rdma_create_event_channel");
    rdma_cm_id *id = nullptr;
    if (rdma_create_id(ch_.get(), &id, nullptr, RDMA_PS_TCP) != 0)
        kvping::throw_errno("rdma_create_id");
    id_.reset(id);

    const auto ai = resolve(opt_);
    const auto ms = static_cast<int>(opt_.timeout.count());
    if (rdma_resolve_addr(id_.get(), nullptr, ai->ai_addr, ms) != 0)
        kvping::throw_errno("rdma_resolve_addr " + opt_.server);
    expect_event(kvping::next_cm_event(*ch_, opt_.timeout, "address resolution"),
                 RDMA_CM_EVENT_ADDR_RESOLVED);
    if (rdma_resolve_route(id_.get(), ms) != 0)
        kvping::throw_errno("rdma_resolve_route");
    expect_event(kvping::next_cm_event(*ch_, opt_.timeout, "route resolution"),
                 RDMA_CM_EVENT_ROUTE_RESOLVED);

    setup_verbs();

    const auto priv = announcement(opt_, &auth_.nc);
    if (!opt_.key.empty()) {
        std::copy_n(priv.begin(), auth_.client.size(), auth_.client.begin());
        kvwire::auth_addr(&id_->route.addr.src_addr, auth_.client_addr);
        kvwire::auth_addr(&id_->route.addr.dst_addr, auth_.server_addr);
    }
    rdma_conn_param param{};
    param.private_data = priv.data();
    param.private_data_len = static_cast<std::uint8_t>(priv.size());
    param.initiator_depth = opt_.initiator_depth;
    param.responder_resources = opt_.responder_resources;
    param.retry_count = 7;
    param.rnr_retry_count = 7;  // infinite: never fail a send on a busy peer
    if (rdma_connect(id_.get(), &param) != 0)
        kvping::throw_errno("rdma_connect");

    const auto ev = kvping::next_cm_event(*ch_, opt_.timeout, "the server's answer");
    if (ev->event == RDMA_CM_EVENT_REJECTED) {
        if (const auto r = kvwire::decode_rej(private_data(*ev)))
            std::printf("kvping: rejected by peer: reason %u (%s): %s\n", unsigned{*r},
                        std::string(kvwire::reason_name(*r)).c_str(),
                        std::string(kvwire::reason_str(*r)).c_str());
        else
            std::printf("kvping: rejected by peer: no kverbs reason (CM status %d)\n",
                        ev->status);
        return false;
    }
    expect_event(ev, RDMA_CM_EVENT_ESTABLISHED);
    conn_ = kvping::Connection(id_.get());

    const auto peer = kvwire::decode_priv(private_data(*ev));
    if (!peer)
        throw Error("server's private data refused: " +
                    std::string(kvwire::reason_name(peer.reason)) + ": " + peer.message);
    std::printf("kvping: accepted by node %u depth %u max_msg %u\n", peer.value.node_id,
                unsigned{peer.value.depth}, peer.value.max_msg);
    // The acceptor's answer to our offer (REP), from our side as the CM
    // hands it over: at most what we offered, each depth for itself.
    std::printf("kvping: peer's RDMA READ depths: initiator %u responder %u\n",
                unsigned{ev->param.conn.initiator_depth},
                unsigned{ev->param.conn.responder_resources});
    if (!opt_.bad.empty())
        throw Error("peer accepted malformed private data (--bad " + opt_.bad + ")");
    peer_max_msg_ = peer.value.max_msg;
    credits_ = kvwire::KvmsgCredits(peer.value.depth);
    if (!opt_.key.empty())
        authenticate(private_data(*ev));
    return true;
}

// The accept's nonce and proof: check the server's proof, then send ours
// as the first message, as kverbs/auth.c's connecting side does.
void Client::authenticate(std::span<const std::uint8_t> rep)
{
    if (rep.size() < kvwire::priv_size + sizeof(kverbs_cm_auth) ||
        !(rep[offsetof(kverbs_cm_priv, flags) + 1] & KVERBS_CM_F_AUTH))
        throw Error("the server answered our key with no proof (it has none)");
    const auto *a = rep.data() + kvwire::priv_size;
    std::copy_n(a + offsetof(kverbs_cm_auth, nonce), KVERBS_CM_NONCE_LEN, auth_.ns.begin());
    std::copy_n(rep.begin(), auth_.server.size(), auth_.server.begin());
    kvwire::Proof got{}, want{}, ours{};
    std::copy_n(a + offsetof(kverbs_cm_auth, proof), KVERBS_CM_PROOF_LEN, got.begin());
    if (!kvwire::auth_proof(opt_.key, true, auth_, want) ||
        !kvwire::auth_proof(opt_.key, false, auth_, ours))
        throw Error("HMAC-SHA256 failed (libcrypto)");
    if (!kvwire::proof_equal(got, want))
        throw Error("the server's proof is wrong (another key)");
    send_proof(ours);
    std::printf("kvping: the server proved the key; our proof sent\n");
}

// KVMSG_TYPE_AUTH with @proof, the first message; waits for its send.
void Client::send_proof(const kvwire::Proof &proof)
{
    std::uint16_t grant = 0;
    if (!credits_.take(grant))
        throw Error("no send credit for the proof");
    const std::span<std::uint8_t> buf(send_buf_);
    if (buf.size() < kvwire::kvmsg_header + proof.size())
        throw Error("send buffer too small for the proof");
    std::copy(proof.begin(), proof.end(), buf.begin() + kvwire::kvmsg_header);
    kvwire::kvmsg_put(buf, kvwire::KvmsgHeader{.type = KVMSG_TYPE_AUTH, .credits = grant,
                                               .seq = tx_seq_++,
                                               .len = static_cast<std::uint32_t>(proof.size())});
    post_send(static_cast<std::uint32_t>(kvwire::kvmsg_header + proof.size()));
    // One send in flight at a time (max_send_wr 1): the next waits for this.
    const auto deadline = std::chrono::steady_clock::now() + opt_.timeout;
    for (;;) {
        ibv_wc wc{};
        const int n = ibv_poll_cq(cq_.get(), 1, &wc);
        if (n < 0)
            throw Error("ibv_poll_cq failed");
        if (n == 1 && wc.wr_id == send_wr_id) {
            if (wc.status != IBV_WC_SUCCESS)
                throw Error(std::string("the proof's send failed: ") +
                            ibv_wc_status_str(wc.status));
            return;
        }
        if (n == 1)
            throw Error("a message from the server before our proof was sent");
        if (std::chrono::steady_clock::now() > deadline)
            throw Error("the proof's send did not complete");
        std::this_thread::sleep_for(1ms);
    }
}

void Client::setup_verbs()
{
    ibv_context *verbs = id_->verbs;
    pd_.reset(ibv_alloc_pd(verbs));
    if (!pd_)
        kvping::throw_errno("ibv_alloc_pd");
    cc_.reset(ibv_create_comp_channel(verbs));
    if (!cc_)
        kvping::throw_errno("ibv_create_comp_channel");
    cq_.reset(ibv_create_cq(verbs, opt_.depth + 1, nullptr, cc_.get(), 0));
    if (!cq_)
        kvping::throw_errno("ibv_create_cq");
    // Armed before anything is posted: see kvping::wait_cq.
    if (const int err = ibv_req_notify_cq(cq_.get(), 0); err != 0)
        kvping::throw_err("ibv_req_notify_cq", err);

    ibv_qp_init_attr attr{};
    attr.send_cq = cq_.get();
    attr.recv_cq = cq_.get();
    attr.cap.max_send_wr = 1;  // one ping in flight
    attr.cap.max_recv_wr = opt_.depth;
    attr.cap.max_send_sge = 1;
    attr.cap.max_recv_sge = 1;
    attr.qp_type = IBV_QPT_RC;
    attr.sq_sig_all = 1;
    qp_ = kvping::Qp(id_.get(), pd_.get(), attr);

    send_buf_.resize(kvwire::kvmsg_header + opt_.size);
    recv_buf_.resize(std::size_t{opt_.depth} * slot_size());
    // int, not the enum: the ibv_reg_mr macro masks it with another enum type.
    constexpr int local_write = IBV_ACCESS_LOCAL_WRITE;
    send_mr_.reset(ibv_reg_mr(pd_.get(), send_buf_.data(), send_buf_.size(), 0));
    recv_mr_.reset(ibv_reg_mr(pd_.get(), recv_buf_.data(), recv_buf_.size(), local_write));
    if (!send_mr_ || !recv_mr_)
        kvping::throw_errno("ibv_reg_mr");
    // Receives go up before connecting: the peer may send once established.
    for (std::size_t slot = 0; slot < opt_.depth; ++slot)
        post_recv(slot);
}

void Client::post_recv(std::size_t slot)
{
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(recv_buf_.data() + slot * slot_size());
    sge.length = static_cast<std::uint32_t>(slot_size());
    sge.lkey = recv_mr_->lkey;
    ibv_recv_wr wr{};
    wr.wr_id = slot;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr *bad = nullptr;
    if (const int err = ibv_post_recv(qp_.get(), &wr, &bad); err != 0)
        kvping::throw_err("ibv_post_recv", err);
}

// Posts ping seq behind a kvmsg header, broken as --bad-msg says.
void Client::send_ping(std::uint32_t seq)
{
    std::uint16_t grant = 0;
    if (!credits_.take(grant))
        throw Error("ping " + std::to_string(seq) + ": no send credit left (peer granted none)");
    const std::span<std::uint8_t> buf(send_buf_);
    kvwire::kping_build(buf.subspan(kvwire::kvmsg_header), seq);
    kvwire::KvmsgHeader h{.type = KVMSG_TYPE_DATA, .credits = grant, .seq = tx_seq_++,
                         .len = opt_.size};
    std::uint32_t wire_len = kvwire::kvmsg_header + opt_.size;
    const auto &bad = opt_.bad_msg;
    if (bad == "type")
        h.type = 9;
    else if (bad == "flags")
        h.flags = 1;
    else if (bad == "reserved")
        h.reserved = 1;
    else if (bad == "len")
        h.len = opt_.size + 1;
    else if (bad == "credits")
        h.credits = 60000;
    else if (bad == "seq")
        h.seq += 5;
    else if (bad == "short")
        wire_len = 8;
    kvwire::kvmsg_put(buf, h);

    post_send(wire_len);
}

// Posts the first @len bytes of send_buf_ (one send in flight at a time).
void Client::post_send(std::uint32_t len)
{
    ibv_sge sge{};
    sge.addr = reinterpret_cast<std::uintptr_t>(send_buf_.data());
    sge.length = len;
    sge.lkey = send_mr_->lkey;
    ibv_send_wr wr{};
    wr.wr_id = send_wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    ibv_send_wr *bad_wr = nullptr;
    if (const int err = ibv_post_send(qp_.get(), &wr, &bad_wr); err != 0)
        kvping::throw_err("ibv_post_send", err);
}

// After a malformed message the peer must drop it and disconnect; an echo
// means it accepted the message.
void Client::expect_close()
{
    const auto deadline = std::chrono::steady_clock::now() + opt_.timeout;
    for (;;) {
        ibv_wc wc{};
        while (ibv_poll_cq(cq_.get(), 1, &wc) > 0)
            if (wc.wr_id != send_wr_id && wc.status == IBV_WC_SUCCESS)
                throw Error("peer answered a message with a malformed header (--bad-msg " +
                            opt_.bad_msg + ")");
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0)
            throw Error("peer neither answered nor closed the connection");
        const auto ev = kvping::poll_cm_event(*ch_, std::min(left, 500ms));
        if (ev && ev->event == RDMA_CM_EVENT_DISCONNECTED) {
            std::printf("kvping: peer closed the connection after a malformed message (%s)\n",
                        opt_.bad_msg.c_str());
            return;
        }
    }
}

// The message a receive completion holds, checked, its grant applied.
std::pair<std::span<const std::uint8_t>, kvwire::KvmsgParse> Client::received_message(const ibv_wc &wc)
{
    const std::span<const std::uint8_t> m(recv_buf_.data() + wc.wr_id * slot_size(), wc.byte_len);
    auto p = kvwire::kvmsg_parse(m, rx_seq_++, opt_.max_msg);
    if (!p.ok())
        throw Error("message from the peer refused: " + p.error);
    if (!credits_.receive(p.hdr.credits))
        throw Error("peer granted more credits than its depth");
    return {m, std::move(p)};
}

// A peer that takes the server's credits and keeps them: every message it
// receives stays in its receive buffer, so it never grants a credit back
// and the server's echoes wait, for its send buffers, inside kvmsg.
void Client::withhold()
{
    const auto end = std::chrono::steady_clock::now() + opt_.withhold;
    std::uint32_t seq = 0;
    std::uint32_t received = 0;
    bool in_flight = false;
    while (std::chrono::steady_clock::now() < end) {
        // The last credit only goes with a grant, which we never give.
        if (!in_flight && credits_.avail() > 1) {
            send_ping(seq++);
            in_flight = true;
        }
        ibv_wc wc{};
        int n = 0;
        while ((n = ibv_poll_cq(cq_.get(), 1, &wc)) > 0) {
            if (wc.status != IBV_WC_SUCCESS)
                throw Error(std::string("withholding: ") + ibv_wc_status_str(wc.status));
            if (wc.wr_id == send_wr_id) {
                in_flight = false;
                continue;
            }
            static_cast<void>(received_message(wc));
            ++received;
        }
        if (n < 0)
            throw Error("ibv_poll_cq failed");
        std::this_thread::sleep_for(20ms);
    }
    std::printf("kvping: withheld credits for %lld ms: %u pings sent, %u messages received, "
                "none re-posted\n", static_cast<long long>(opt_.withhold.count()), seq, received);
}

void Client::ping_pong()
{
    if (opt_.size > peer_max_msg_)
        throw Error("--size " + std::to_string(opt_.size) + " exceeds the server's max_msg " +
                    std::to_string(peer_max_msg_));
    using clock = std::chrono::steady_clock;
    std::vector<clock::duration> rtt;
    rtt.reserve(opt_.count);

    if (!opt_.bad_msg.empty()) {
        if (opt_.bad_msg != "silent" && opt_.bad_msg != "idle")
            send_ping(0);
        expect_close();
        throw PeerClosed{};
    }
    if (opt_.withhold.count() > 0) {
        withhold();
        return;
    }

    for (std::uint32_t seq = 0; seq < opt_.count; ++seq) {
        const auto t0 = clock::now();
        send_ping(seq);

        // The send buffer is reused only after its completion, and exactly
        // one echo must arrive per ping; credit-only messages may come too.
        bool sent = false;
        std::optional<std::span<const std::uint8_t>> echo;
        std::uint64_t echo_slot = 0;
        while (!sent || !echo) {
            ibv_wc wc{};
            int n = 0;
            while ((n = ibv_poll_cq(cq_.get(), 1, &wc)) > 0) {
                if (wc.status != IBV_WC_SUCCESS)
                    throw Error(std::string("ping ") + std::to_string(seq) + ": " +
                                (wc.wr_id == send_wr_id ? "send" : "receive") +
                                " failed: " + ibv_wc_status_str(wc.status));
                if (wc.wr_id == send_wr_id) {
                    sent = true;
                    continue;
                }
                const auto [m, p] = received_message(wc);
                if (p.hdr.type == KVMSG_TYPE_CREDIT) {
                    post_recv(wc.wr_id);
                    credits_.reposted();
                } else if (echo) {
                    throw Error("ping " + std::to_string(seq) + ": more than one reply");
                } else {
                    rtt.push_back(clock::now() - t0);
                    echo = m.subspan(kvwire::kvmsg_header);
                    echo_slot = wc.wr_id;
                }
            }
            if (n < 0)
                throw Error("ibv_poll_cq failed");
            if (!sent || !echo)
                kvping::wait_cq(*cc_, *cq_, opt_.timeout);
        }

        if (echo->size() != opt_.size)
            throw Error("reply " + std::to_string(seq) + " is " + std::to_string(echo->size()) +
                        " bytes, sent " + std::to_string(opt_.size));
        if (const auto check = kvwire::kping_verify(*echo, seq); !check)
            throw Error("reply " + std::to_string(seq) + " corrupt: " + check.message);
        post_recv(echo_slot);
        credits_.reposted();
    }

    std::ranges::sort(rtt);
    const auto median = std::chrono::duration<double, std::micro>(rtt[rtt.size() / 2]);
    std::printf("kvping: %u round trips ok, median RTT %.1f us\n", opt_.count, median.count());
}

} // namespace

int main(int argc, char **argv)
{
    Options opts;
    try {
        opts = parse_args(argc, argv);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "kvping: %s\n", e.what());
        return kvcli::exit_usage;
    }
    try {
        Client client(std::move(opts));
        const int status = client.run();
        std::fflush(stdout);
        return status;
    } catch (const PeerClosed &) {
        std::fflush(stdout);
        return exit_peer_closed;
    } catch (const std::exception &e) {
        std::fflush(stdout);
        std::fprintf(stderr, "kvping: %s\n", e.what());
        return exit_fail;
    }
}

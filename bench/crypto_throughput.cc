// Benchmark for checkpoint encryption: MB/s (10^6 B/s) of SHA-256, XXH3-128 (base/checksum.h),
// AES-256-GCM and SM4 (SM4-GCM where OpenSSL has it; SM4-CTR, HMAC-SM3 and both together as the
// sm4-ctr-hmac-sm3 suite uses them) on one core and on every core, each as a ratio of a
// single-core memcpy of the same buffer; then the whole chunked format (crypt/encrypted_file.h)
// in memory with all threads. Best of three runs of at least --seconds each.
// Run: build/linux/bench/crypto_throughput [--seconds 0.5] [--threads N]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "base/checksum.h"
#include "crypt/encrypted_file.h"
#include "platform/crypto.h"

using namespace gpuhost;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::size_t k_single_bytes = 64u << 20;      // one core: larger than any cache
constexpr std::size_t k_per_thread_bytes = 16u << 20;  // all cores: bounded memory on big hosts
constexpr std::size_t k_chunk = 4u << 20;              // the format's default chunk

double g_seconds = 0.5;

// One measured operation over `in` (read) and `out` (written, same size).
using Operation = std::function<void(const std::uint8_t* in, std::uint8_t* out, std::size_t bytes)>;

struct Buffers {
  std::vector<std::uint8_t> in, out;
  explicit Buffers(std::size_t bytes) : in(bytes), out(bytes) {
    for (std::size_t i = 0; i < bytes; ++i) in[i] = static_cast<std::uint8_t>(i * 2654435761u >> 13);
  }
};

// MB/s of `op` on `threads` threads, each over its own buffers: best of three runs, each repeating
// the pass until g_seconds have elapsed.
double measure(const Operation& op, unsigned threads, std::size_t bytes_per_thread) {
  std::vector<Buffers> buffers;
  for (unsigned t = 0; t < threads; ++t) buffers.emplace_back(bytes_per_thread);
  double best = 0;
  for (int run = 0; run < 3; ++run) {
    std::vector<std::uint64_t> done(threads, 0);
    auto start = Clock::now();
    auto work = [&](unsigned t) {
      do {
        op(buffers[t].in.data(), buffers[t].out.data(), bytes_per_thread);
        done[t] += bytes_per_thread;
      } while (std::chrono::duration<double>(Clock::now() - start).count() < g_seconds);
    };
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work, t);
    work(0);
    for (auto& thread : pool) thread.join();
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    std::uint64_t total = 0;
    for (auto d : done) total += d;
    best = std::max(best, total / seconds / 1e6);
  }
  return best;
}

void must(const Result<void>& result, const char* what) {
  if (!result) {
    std::fprintf(stderr, "%s: %s\n", what, result.error().message.c_str());
    std::exit(1);
  }
}

void must(const Result<platform::Digest32>& result, const char* what) {
  if (!result) must(Result<void>(std::unexpected(result.error())), what);
}

// Applies `chunk_op` to consecutive 4 MiB chunks, as the file format does.
Operation chunked(std::function<void(const std::uint8_t*, std::uint8_t*, std::size_t)> chunk_op) {
  return [chunk_op](const std::uint8_t* in, std::uint8_t* out, std::size_t bytes) {
    for (std::size_t at = 0; at < bytes; at += k_chunk)
      chunk_op(in + at, out + at, std::min(k_chunk, bytes - at));
  };
}

}  // namespace

int main(int argc, char** argv) {
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--seconds") == 0) g_seconds = std::atof(argv[i + 1]);
    if (std::strcmp(argv[i], "--threads") == 0) threads = static_cast<unsigned>(std::atoi(argv[i + 1]));
  }

  std::array<std::uint8_t, 32> aes_key{}, mac_key{};
  std::array<std::uint8_t, 16> sm4_key{}, counter{};
  std::array<std::uint8_t, 12> nonce{};
  std::array<std::uint8_t, 16> tag{};
  must(platform::random_bytes(aes_key), "random key");
  must(platform::random_bytes(sm4_key), "random key");
  must(platform::random_bytes(mac_key), "random key");

  struct Row {
    const char* name;
    Operation op;
  };
  std::vector<Row> rows = {
      {"memcpy", [](const std::uint8_t* in, std::uint8_t* out, std::size_t n) { std::memcpy(out, in, n); }},
      {"SHA-256",
       [](const std::uint8_t* in, std::uint8_t*, std::size_t n) {
         platform::Sha256 hasher;
         hasher.update(in, n);
         (void)hasher.finish();
       }},
      {"XXH3-128",
       [](const std::uint8_t* in, std::uint8_t*, std::size_t n) {
         ContentHasher hasher;
         hasher.update(in, n);
         (void)hasher.digest();
       }},
      {"AES-256-GCM", chunked([&](const std::uint8_t* in, std::uint8_t* out, std::size_t n) {
         must(platform::aead_seal(platform::AeadAlgorithm::aes_256_gcm, aes_key, nonce, {}, {in, n}, {out, n},
                                  tag),
              "AES-256-GCM");
       })},
  };
  if (platform::aead_available(platform::AeadAlgorithm::sm4_gcm))
    rows.push_back({"SM4-GCM", chunked([&](const std::uint8_t* in, std::uint8_t* out, std::size_t n) {
                      must(platform::aead_seal(platform::AeadAlgorithm::sm4_gcm, sm4_key, nonce, {}, {in, n},
                                               {out, n}, tag),
                           "SM4-GCM");
                    })});
  if (platform::sm4_available()) {
    rows.push_back({"SM4-CTR", chunked([&](const std::uint8_t* in, std::uint8_t* out, std::size_t n) {
                      must(platform::sm4_ctr_xor(sm4_key, counter, {in, n}, {out, n}), "SM4-CTR");
                    })});
    rows.push_back({"HMAC-SM3", chunked([&](const std::uint8_t* in, std::uint8_t*, std::size_t n) {
                      must(platform::hmac(platform::HashAlgorithm::sm3, mac_key, {{in, n}}), "HMAC-SM3");
                    })});
    rows.push_back(
        {"SM4-CTR+HMAC-SM3", chunked([&](const std::uint8_t* in, std::uint8_t* out, std::size_t n) {
           must(platform::sm4_ctr_xor(sm4_key, counter, {in, n}, {out, n}), "SM4-CTR");
           must(platform::hmac(platform::HashAlgorithm::sm3, mac_key, {{out, n}}), "HMAC-SM3");
         })});
  }

  std::printf("%s; %u threads; MB/s = 10^6 bytes/s; best of 3 x %.2f s\n", platform::crypto_library().c_str(),
              threads, g_seconds);
  std::printf("%-18s %12s %10s %12s %10s\n", "", "1 core", "x memcpy", "all cores", "x memcpy");
  double memcpy_one = 0;
  for (const Row& row : rows) {
    double one = measure(row.op, 1, k_single_bytes);
    double all = measure(row.op, threads, k_per_thread_bytes);
    if (memcpy_one == 0) memcpy_one = one;
    std::printf("%-18s %12.0f %10.3f %12.0f %10.3f\n", row.name, one, one / memcpy_one, all,
                all / memcpy_one);
  }

  // The chunked format end to end (reads, seals, frames, copies out) on all threads.
  crypt::EncryptOptions options;
  options.threads = threads;
  std::array<std::uint8_t, 32> user_key{};
  must(platform::random_bytes(user_key), "random key");
  auto key = crypt::EncryptionKey::from_bytes(user_key);
  if (!key) return 1;
  std::string plain(std::size_t{threads} * 2 * k_chunk, 'x');
  std::vector<crypt::CipherSuite> suites = {crypt::CipherSuite::aes_256_gcm};
  if (auto sm4 = crypt::choose_suite("sm4")) suites.push_back(*sm4);
  crypt::DecryptOptions decrypt_options;
  decrypt_options.threads = threads;
  for (crypt::CipherSuite suite : suites) {
    options.suite = suite;
    auto sealed = crypt::encrypt_bytes(*key, options, plain);
    if (!sealed) return 1;
    double enc = measure([&](const std::uint8_t*, std::uint8_t*,
                             std::size_t) { (void)crypt::encrypt_bytes(*key, options, plain); },
                         1, plain.size());
    double dec = measure([&](const std::uint8_t*, std::uint8_t*,
                             std::size_t) { (void)crypt::decrypt_bytes(*key, decrypt_options, *sealed); },
                         1, plain.size());
    std::printf(
        "format %-11s encrypt %8.0f MB/s (%.3f x memcpy), decrypt %8.0f MB/s (%.3f x memcpy), %u threads\n",
        crypt::suite_name(suite), enc, enc / memcpy_one, dec, dec / memcpy_one, threads);
  }
  return 0;
}

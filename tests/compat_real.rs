//! The rings of proxies and client libraries, key for key against the real implementation:
//! nginx 1.22 (`hash $arg_key consistent`, Debian's `nginx-light`, a real proxy in front of
//! backends that answer their own name), Predis 1.1.10 (Debian's `php-nrk-predis`: its
//! `PredisCluster` over a `HashRing` and a `KetamaRing`), redis-rb 4.8.0 (Debian's
//! `ruby-redis`: `Redis::Distributed`), python-memcached 1.59 (`Client._get_server` against real
//! memcached servers), pymemcache 3.5.2 (`HashClient`'s hasher) and pylibmc 1.6.3 over
//! libmemcached 1.0.18 (`ketama_weighted`, keys set through it against real memcached
//! servers, then found on each). Each runs 20000 keys over rings with weights, a node
//! joining, a node leaving from the middle, and node names of several shapes; ringslot's
//! answer is read through `RING.MGET` on a real redis-server with the module.

use ringslot_harness::lb::{Haproxy, HaproxyServer, Nginx, Upstream};
use ringslot_harness::prelude::*;
use ringslot_harness::proxy::Memcached;
use ringslot_harness::redis;
use std::io::Write;
use std::process::{Command, Stdio};

const KEYS: usize = 20_000;

/// Keys of varied shapes, query-safe (nginx hashes `$arg_key` as sent).
fn plain_keys() -> Vec<String> {
    (0..KEYS)
        .map(|i| match i % 4 {
            0 => format!("user:{i}"),
            1 => format!("session-{}", i * 7919),
            2 => format!("img.{i}.thumb_{}", i % 13),
            _ => format!("{}", i as u64 * 2_654_435_761 % 1_000_003),
        })
        .collect()
}

/// Keys with hash tags of both rules (Redis's, and redis-rb's leading `{...}`), and without.
fn tagged_keys() -> Vec<String> {
    (0..KEYS)
        .map(|i| match i % 5 {
            0 => format!("{{user:{}}}:cart", i % 3001),
            1 => format!("order:{{{}}}:{i}", i % 977),
            2 => format!("{{}}empty{i}"),
            3 => format!("{{}}}}odd{i}"),
            _ => format!("plain:{i}"),
        })
        .collect()
}

/// ringslot's owners of `keys` on a ring `RING.CREATE r COMPAT compat` with `nodes` (name,
/// weight) added in order, through `RING.MGET`.
fn ringslot_owners(
    server: &Server,
    compat: &str,
    nodes: &[(String, u32)],
    keys: &[String],
) -> Vec<String> {
    let mut con = server.client();
    let _: () = redis::cmd("DEL").arg("r").query(&mut con).expect("DEL");
    let _: () = redis::cmd("RING.CREATE")
        .arg("r")
        .arg("COMPAT")
        .arg(compat)
        .query(&mut con)
        .expect("RING.CREATE");
    for (name, weight) in nodes {
        let mut add = redis::cmd("RING.ADD");
        add.arg("r");
        if *weight != 1 {
            add.arg("WEIGHT").arg(*weight);
        }
        add.arg(name);
        let _: i64 = add.query(&mut con).expect("RING.ADD");
    }
    let mut out = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(1000) {
        let owners: Vec<String> = redis::cmd("RING.MGET")
            .arg("r")
            .arg(chunk)
            .query(&mut con)
            .expect("RING.MGET");
        out.extend(owners);
    }
    out
}

/// Fails naming the keys placed differently, when any is.
fn same(what: &str, keys: &[String], real: &[String], ours: &[String]) {
    assert_eq!(
        real.len(),
        keys.len(),
        "{what}: the real one answered fewer keys"
    );
    let differ: Vec<String> = keys
        .iter()
        .zip(real.iter().zip(ours))
        .filter(|(_, (r, o))| r != o)
        .map(|(k, (r, o))| format!("{k}: real {r}, ringslot {o}"))
        .collect();
    assert!(
        differ.is_empty(),
        "{what}: {} of {} keys differ, first: {:?}",
        differ.len(),
        keys.len(),
        &differ[..differ.len().min(5)]
    );
}

/// Runs a helper program with `args`, `keys` on its stdin one a line, and returns its lines.
fn run_lines(program: &str, args: &[String], keys: &[String]) -> Vec<String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {program} ({e}): `make deps` installs it"));
    let mut input = keys.join("\n");
    input.push('\n');
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("wait");
    let _ = writer.join();
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

fn fixture(name: &str) -> String {
    format!(
        "{}/tests/fixtures/compat/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// The node sets each implementation is checked on: a base set, one joining, one leaving from
/// the middle, and ten nodes.
fn scenarios(
    base: &[(String, u32)],
    joiner: (String, u32),
    ten: &[(String, u32)],
) -> Vec<(&'static str, Vec<(String, u32)>)> {
    let mut joined = base.to_vec();
    joined.push(joiner);
    let mut left = base.to_vec();
    left.remove(1);
    vec![
        ("base", base.to_vec()),
        ("join", joined),
        ("leave", left),
        ("ten", ten.to_vec()),
    ]
}

/// nginx's owners of `keys` with the upstream `nodes` (a `unix:` name is a socket in `dir`,
/// written `unix:@/name`): a fresh nginx whose backends listen on fresh ports, tried again on
/// other ports when one was taken meanwhile. Returns the real owners and the node list as
/// ringslot must name it (the same server texts).
fn nginx_owners(nodes: &[(String, u32)], keys: &[String]) -> (Vec<String>, Vec<(String, u32)>) {
    let mut last = String::new();
    for _ in 0..3 {
        let dir = Nginx::socket_dir().expect("dir");
        let named: Vec<(String, u32)> = nodes
            .iter()
            .map(|(n, w)| {
                let n = n
                    .replace("@", &dir.path().display().to_string())
                    .replace("PORT", &free_port().expect("port").to_string());
                (n, *w)
            })
            .collect();
        let upstream: Vec<Upstream> = named
            .iter()
            .map(|(n, w)| Upstream {
                server: n.clone(),
                weight: *w,
            })
            .collect();
        match Nginx::start_in(dir, &upstream) {
            Ok(nginx) => {
                let real = nginx.owners(keys).unwrap_or_else(|e| panic!("{e}"));
                return (real, named);
            }
            Err(e) if e.0.contains("Address already in use") => last = e.0,
            Err(e) => panic!("nginx: {e}"),
        }
    }
    panic!("nginx: {last}")
}

#[test]
fn nginx_hash_consistent_places_keys_as_ringslot() {
    let server = Server::start();
    let keys = plain_keys();
    // Three shapes of `server`: an address, a name (`localhost`: nginx listens on every
    // address it resolves to), a unix socket (hashed without its `unix:` prefix, no port).
    let shape = |i: usize| match i % 3 {
        0 => "127.0.0.1:PORT".to_string(),
        1 => "localhost:PORT".to_string(),
        _ => format!("unix:@/b{i}.sock"),
    };
    let weights = [1, 2, 1, 3, 1];
    let base: Vec<(String, u32)> = (0..4).map(|i| (shape(i), weights[i])).collect();
    let ten: Vec<(String, u32)> = (0..10).map(|i| (shape(i), 1)).collect();
    for (what, nodes) in scenarios(&base, (shape(4), weights[4]), &ten) {
        let (real, named) = nginx_owners(&nodes, &keys);
        let ours = ringslot_owners(&server, "nginx", &named, &keys);
        same(&format!("nginx {what}"), &keys, &real, &ours);
    }
}

/// Predis's view of `nodes` (name, weight; weight 0 leaves it to Predis's default 100).
fn predis(ring: &str, replicas: u32, nodes: &[(String, u32)], keys: &[String]) -> Vec<String> {
    let list: Vec<String> = nodes
        .iter()
        .map(|(n, w)| {
            let weight = if *w == 0 {
                "null".to_string()
            } else {
                w.to_string()
            };
            format!("[\"{n}\",{weight}]")
        })
        .collect();
    let config = format!(
        "{{\"ring\":\"{ring}\",\"replicas\":{replicas},\"nodes\":[{}]}}",
        list.join(",")
    );
    run_lines("php", &[fixture("predis_owners.php"), config], keys)
}

/// A node list: (name, weight), in order.
type Nodes = Vec<(String, u32)>;

/// Predis's base nodes (names of every shape it takes), a joiner, and ten nodes.
fn predis_nodes() -> (Nodes, (String, u32), Nodes) {
    let base = vec![
        ("10.0.0.1:6379".to_string(), 100),
        ("/var/run/redis/cache.sock".to_string(), 100),
        ("cache-b.example:7000".to_string(), 250),
        ("[::1]:6380".to_string(), 30),
    ];
    let joiner = ("10.0.0.5:6379".to_string(), 100);
    let ten = (0..10).map(|i| (format!("10.1.0.{i}:6379"), 100)).collect();
    (base, joiner, ten)
}

#[test]
fn predis_hash_ring_places_keys_as_ringslot() {
    let server = Server::start();
    let keys = tagged_keys();
    let (base, joiner, ten) = predis_nodes();
    for (what, nodes) in scenarios(&base, joiner, &ten) {
        let real = predis("hashring", 128, &nodes, &keys);
        let ours = ringslot_owners(&server, "predis", &nodes, &keys);
        same(&format!("predis {what}"), &keys, &real, &ours);
    }
    // Predis's default weight is 100: nodes left without one weigh as nodes given 100.
    let unweighted: Vec<(String, u32)> = ten.iter().map(|(n, _)| (n.clone(), 0)).collect();
    let real = predis("hashring", 128, &unweighted, &keys);
    let ours = ringslot_owners(&server, "predis", &ten, &keys);
    same("predis default weights", &keys, &real, &ours);
}

#[test]
fn predis_ketama_ring_places_keys_as_ringslot() {
    let server = Server::start();
    let keys = tagged_keys();
    let (base, joiner, ten) = predis_nodes();
    for (what, nodes) in scenarios(&base, joiner, &ten) {
        let real = predis("ketama", 0, &nodes, &keys);
        let ours = ringslot_owners(&server, "predis-ketama", &nodes, &keys);
        same(&format!("predis-ketama {what}"), &keys, &real, &ours);
    }
}

#[test]
fn redis_rb_distributed_places_keys_as_ringslot() {
    let server = Server::start();
    let keys = tagged_keys();
    // redis-rb names a node by its client id: `redis://host:port/db`, `unix:///path/0`, or an
    // id given whole; ringslot takes `host:port` and `/path` for the first two.
    let base: Vec<(String, u32)> = [
        "10.0.0.1:6379",
        "/var/run/redis/cache.sock",
        "redis://cache-b.example:7000/2",
        "10.0.0.4:6380",
    ]
    .iter()
    .map(|n| (n.to_string(), 1))
    .collect();
    let joiner = ("10.0.0.5:6379".to_string(), 1);
    let ten: Vec<(String, u32)> = (0..10).map(|i| (format!("10.1.0.{i}:6379"), 1)).collect();
    let as_ruby = |n: &str| {
        if n.contains("://") || n.starts_with('/') {
            n.to_string()
        } else {
            format!("redis://{n}")
        }
    };
    for (what, nodes) in scenarios(&base, joiner, &ten) {
        let args: Vec<String> = nodes.iter().map(|(n, _)| as_ruby(n)).collect();
        let real = run_lines(
            "ruby",
            &{
                let mut a = vec![fixture("redis_rb_owners.rb")];
                a.extend(args);
                a
            },
            &keys,
        );
        let ours: Vec<String> = ringslot_owners(&server, "redis-rb", &nodes, &keys)
            .iter()
            .map(|n| {
                String::from_utf8_lossy(&ringslot_engine::flavour::redis_rb_id(n.as_bytes()))
                    .into_owned()
            })
            .collect();
        same(&format!("redis-rb {what}"), &keys, &real, &ours);
    }
}

/// HAProxy's owners of `keys` with `servers` (name, weight) in order under `hash_type`.
fn haproxy_owners(servers: &[(String, u32)], hash_type: &str, keys: &[String]) -> Vec<String> {
    let servers: Vec<HaproxyServer> = servers
        .iter()
        .map(|(n, w)| HaproxyServer {
            name: n.clone(),
            weight: *w,
        })
        .collect();
    let proxy = Haproxy::start(&servers, hash_type).unwrap_or_else(|e| panic!("{e}"));
    proxy
        .owners(keys)
        .unwrap_or_else(|e| panic!("haproxy: {e}"))
}

#[test]
fn haproxy_hash_type_consistent_places_keys_as_ringslot() {
    let server = Server::start();
    let keys = plain_keys();
    // HAProxy keys a server's points by its place in the backend, not its name or address:
    // the node leaving from the middle moves the points of every server after it.
    let weights = [1, 2, 3, 1, 1];
    let node = |i: usize| (format!("cache-{i}"), weights[i % 5]);
    let base: Vec<(String, u32)> = (0..4).map(node).collect();
    let ten: Vec<(String, u32)> = (10..20).map(|i| (format!("cache-{i}"), 1)).collect();
    for (compat, hash_type) in [
        ("haproxy", "consistent"),
        ("haproxy-crc32", "consistent crc32"),
    ] {
        for (what, nodes) in scenarios(&base, node(4), &ten) {
            let real = haproxy_owners(&nodes, hash_type, &keys);
            let ours = ringslot_owners(&server, compat, &nodes, &keys);
            same(&format!("{compat} {what}"), &keys, &real, &ours);
        }
    }
}

/// Backends that hold every request open: each reports `(its index, the key)` as a request
/// arrives and answers it only once the sender of `release` is dropped (the connection
/// threads end with the test process otherwise; HAProxy, the only process, is dropped).
struct Holding {
    addresses: Vec<String>,
    arrivals: std::sync::mpsc::Receiver<(usize, String)>,
    release: Option<std::sync::mpsc::Sender<()>>,
}

impl Holding {
    fn start(count: usize) -> Holding {
        use std::io::{BufRead, BufReader};
        use std::sync::{mpsc, Arc, Mutex};
        let (tx, arrivals) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        let released = Arc::new(Mutex::new(released));
        let mut addresses = Vec::new();
        for i in 0..count {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            addresses.push(listener.local_addr().expect("address").to_string());
            let (tx, released) = (tx.clone(), released.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming().flatten() {
                    let (tx, released) = (tx.clone(), released.clone());
                    std::thread::spawn(move || {
                        let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                        let mut line = String::new();
                        let _ = reader.read_line(&mut line);
                        let key = line
                            .split(' ')
                            .nth(1)
                            .and_then(|u| u.split_once("key="))
                            .map(|(_, k)| k.to_string())
                            .unwrap_or_default();
                        let _ = tx.send((i, key));
                        // Held until released: recv fails once the sender is dropped.
                        let _ = released.lock().map(|r| r.recv());
                        let mut stream = stream;
                        let _ = stream.write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                        );
                    });
                }
            });
        }
        Holding {
            addresses,
            arrivals,
            release: Some(release),
        }
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        self.release.take();
    }
}

#[test]
fn haproxy_hash_balance_factor_places_requests_in_flight_as_ringslot() {
    // Requests held open, sent one at a time (each once the previous one reached its server),
    // so that HAProxy's count of requests in flight is the model's: ringslot's bounded scheme
    // by HAProxy's rule must send each to the same server. Hot keys repeat, so servers fill
    // and requests walk on around the ring.
    use ringslot_engine::schemes::haproxy_bounded_loads;
    use ringslot_engine::{Flavour, Ring};
    let keys: Vec<String> = (0..240)
        .map(|i| format!("item:{}", (i * i) % 13 + i % 3))
        .collect();
    for (weights, factor) in [
        (vec![1, 1, 1, 1], 125),
        (vec![1, 2, 3, 1], 150),
        (vec![2, 1, 1, 1, 1], 110),
    ] {
        let backends = Holding::start(weights.len());
        let servers: Vec<HaproxyServer> = weights
            .iter()
            .enumerate()
            .map(|(i, &w)| HaproxyServer {
                name: format!("s{i}"),
                weight: w,
            })
            .collect();
        let proxy = Haproxy::start_in_front(
            &servers,
            &backends.addresses,
            "consistent",
            &format!("hash-balance-factor {factor}"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let mut held = Vec::new();
        let mut real = Vec::new();
        for key in &keys {
            let mut c = std::net::TcpStream::connect(("127.0.0.1", proxy.port)).expect("connect");
            c.write_all(format!("GET /?key={key} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
                .expect("send");
            held.push(c);
            // A bound for a broken proxy, not a timing window: each arrival is awaited.
            let (server, arrived) = backends
                .arrivals
                .recv_timeout(std::time::Duration::from_secs(60))
                .unwrap_or_else(|e| panic!("{key} did not reach a server: {e}"));
            assert_eq!(&arrived, key, "requests arrive in order");
            real.push(server as u32);
        }
        let mut ring = Ring::new(Flavour::Haproxy, Flavour::Haproxy.default_vnodes(), false);
        ring.set_nodes(
            servers
                .iter()
                .map(|s| (s.name.clone().into_bytes(), s.weight))
                .collect(),
        );
        let points: Vec<(u64, u32)> = ring.points().iter().map(|p| p.pair()).collect();
        let hashes: Vec<u64> = keys
            .iter()
            .map(|k| ring.member_hash(k.as_bytes()))
            .collect();
        let ours: Vec<u32> = haproxy_bounded_loads(&points, &weights, &hashes, factor)
            .into_iter()
            .map(|o| o.expect("a server"))
            .collect();
        let differ: Vec<String> = keys
            .iter()
            .enumerate()
            .filter(|(i, _)| real[*i] != ours[*i])
            .map(|(i, k)| format!("#{i} {k}: haproxy s{}, ringslot s{}", real[i], ours[i]))
            .collect();
        assert!(
            differ.is_empty(),
            "weights {weights:?}, factor {factor}: {} of {} requests differ, first: {:?}",
            differ.len(),
            keys.len(),
            &differ[..differ.len().min(5)]
        );
        // The bound did something: without it the hot keys' servers would take more.
        let plain: Vec<u32> = keys
            .iter()
            .map(|k| ring.owner(k.as_bytes()).expect("owner") as u32)
            .collect();
        assert_ne!(plain, ours, "the balance factor changed no placement");
        drop(held);
    }
}

/// A Python client's owners of `keys` with `nodes` (`host:port`, weight) in order
/// (tests/fixtures/compat/python_owners.py, with Debian's python3 and its packages).
fn python_owners(library: &str, nodes: &[(String, u32)], keys: &[String]) -> Vec<String> {
    let list: Vec<String> = nodes
        .iter()
        .map(|(n, w)| {
            let (host, port) = n.rsplit_once(':').expect("host:port");
            format!("[\"{host}\",{port},{w}]")
        })
        .collect();
    let args = [
        fixture("python_owners.py"),
        library.to_string(),
        format!("[{}]", list.join(",")),
    ];
    run_lines("/usr/bin/python3", &args, keys)
}

/// A Python memcached client (`library` of python_owners.py) against ringslot's `compat` on
/// real memcached servers, one for each node of every case: weights 1, 3, 2, 1 with a fifth
/// of weight 1 joining, the second leaving, and ten of weight 1.
fn against_memcached_servers(library: &str, compat: &str, keys: &[String]) {
    let server = Server::start();
    let fleet: Vec<Memcached> = (0..10)
        .map(|_| Memcached::start(8).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let weights = [1, 3, 2, 1, 1];
    let node = |i: usize| (fleet[i].address(), weights[i % 5]);
    let base: Vec<(String, u32)> = (0..4).map(node).collect();
    let ten: Vec<(String, u32)> = (0..10).map(|i| (fleet[i].address(), 1)).collect();
    for (what, nodes) in scenarios(&base, node(4), &ten) {
        let real = python_owners(library, &nodes, keys);
        let ours = ringslot_owners(&server, compat, &nodes, keys);
        same(&format!("{library} {what}"), keys, &real, &ours);
    }
}

#[test]
fn python_memcached_places_keys_as_ringslot() {
    // python-memcached connects to the server it picks and skips a dead one: real servers.
    against_memcached_servers("memcache", "python-memcached", &tagged_keys());
}

#[test]
fn pylibmc_ketama_weighted_places_keys_as_ringslot() {
    // pylibmc sets every key through libmemcached's weighted ketama, then each server is
    // asked which keys it holds (8 MiB each hold the 20000 keys).
    against_memcached_servers("pylibmc", "ketama", &plain_keys());
}

#[test]
fn pymemcache_hash_client_places_keys_as_ringslot() {
    let server = Server::start();
    let keys = tagged_keys();
    let base: Vec<(String, u32)> = [
        "10.0.0.1:11211",
        "cache-b.example:11211",
        "10.0.0.3:11212",
        "localhost:11213",
    ]
    .iter()
    .map(|n| (n.to_string(), 1))
    .collect();
    let ten: Vec<(String, u32)> = (0..10).map(|i| (format!("10.1.0.{i}:11211"), 1)).collect();
    for (what, nodes) in scenarios(&base, ("10.0.0.5:11211".to_string(), 1), &ten) {
        let real = python_owners("pymemcache", &nodes, &keys);
        let ours = ringslot_owners(&server, "pymemcache", &nodes, &keys);
        same(&format!("pymemcache {what}"), &keys, &real, &ours);
    }
}

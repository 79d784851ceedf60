//! The descriptor table is grown once, up front: Linux grows it by doubling when
//! a new descriptor does not fit, and in a process of several threads each
//! growth blocks every opener of the process for an RCU grace period (the
//! proxy's serving threads stalled 12–22 ms in `socket()` at each doubling of a
//! 1,000-stream ramp, and 1 % of requests reached the upstream 10 ms late).

/// The size of this process's descriptor table, from `/proc/self/status`.
fn fd_table_size() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("FDSize:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("an FDSize line")
}

#[test]
fn raising_the_open_files_limit_grows_the_descriptor_table_for_that_many_at_once() {
    let limit = tpscope_sim::raise_nofile_limit().expect("the open-files limit");
    let want = (limit as usize).min(tpscope_sim::FD_TABLE_RESERVE);
    let size = fd_table_size();
    assert!(
        size >= want,
        "the table holds {size} descriptors, {want} were reserved (soft limit {limit})"
    );
    // Opening a socket after the reservation does not grow it.
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").expect("a socket");
    assert_eq!(fd_table_size(), size);
    drop(socket);
}

#[test]
fn a_reservation_of_nothing_or_of_what_the_table_holds_changes_nothing() {
    let before = fd_table_size();
    tpscope_sim::reserve_fd_table(0).expect("nothing to reserve");
    tpscope_sim::reserve_fd_table(1).expect("one descriptor");
    assert!(fd_table_size() >= before);
}

//! What the load crate's integration tests share: a span log written to memory.

use std::io::Write;
use std::sync::{Arc, Mutex};

/// A writer into a shared byte buffer: the test keeps a clone and reads what the
/// run's writer thread wrote.
#[derive(Clone, Default)]
pub struct Buf(pub Arc<Mutex<Vec<u8>>>);

impl Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

//! 100 ready jobs, 4 workers: `cargo run -p tpscope-record --example pipeline -- out.jsonl`.
use std::{sync::Mutex, thread, time::Duration};
use tpscope_record::{Recorder, RunInfo};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).unwrap_or("pipeline.jsonl".into());
    let rec = Recorder::create(&path, RunInfo::new().cap(4).label("job", "example"))?;
    let ready = Mutex::new(
        (0..100)
            .map(|i| rec.queued(i.to_string()))
            .collect::<Vec<_>>(),
    );
    let next = || ready.lock().unwrap().pop(); // holds the lock only while it pops
    let work = || {
        while let Some(job) = next() {
            let req = job.admitted(); // took one of the 4 slots
            for _ in 0..8 {
                thread::sleep(Duration::from_millis(2)); // the model streams a token
                req.tokens(1);
            }
            req.finish_ok(None); // no `usage`: the 8 tokens counted above
        }
    };
    thread::scope(|s| (0..4).for_each(|_| drop(s.spawn(work))));
    println!("{} spans in {path}", rec.close()?.counts.spans);
    Ok(())
}

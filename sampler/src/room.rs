//! Room for many chains' draws, allocated and written once on threads of its own ahead of the
//! draws: a large run's traces are gigabytes, and filling room that was never written costs a
//! page fault per page on the thread that fills it (measurements in `bench/journal.md`).

use crate::run::DrawStats;

/// Threads that make the room: page faults share the process's memory map, so more stop
/// helping, and the work the room is made beside goes on meanwhile.
const ROOM_THREADS: usize = 4;

/// Each chain's room for `draws` rows of `n_columns` values and their statistics, being made
/// (empty vectors whose capacity has been written once: zeros past their length).
#[derive(Debug)]
pub struct Room {
    thread: std::thread::JoinHandle<Vec<(Vec<f64>, Vec<DrawStats>)>>,
}

impl Room {
    /// Starts making the room of `chains` chains.
    pub fn make(chains: usize, n_columns: usize, draws: usize) -> Room {
        let thread = std::thread::spawn(move || {
            let threads = std::thread::available_parallelism()
                .map_or(1, |n| n.get() / 2)
                .clamp(1, ROOM_THREADS);
            let per_thread = chains.div_ceil(threads).max(1);
            std::thread::scope(|scope| {
                let parts: Vec<_> = (0..chains)
                    .step_by(per_thread)
                    .map(|start| {
                        let end = (start + per_thread).min(chains);
                        scope.spawn(move || {
                            (start..end)
                                .map(|_| written_room(n_columns, draws))
                                .collect::<Vec<_>>()
                        })
                    })
                    .collect();
                // A part whose thread panicked is missing: its chains go without room.
                parts
                    .into_iter()
                    .flat_map(|part| part.join().unwrap_or_default())
                    .collect()
            })
        });
        Room { thread }
    }

    /// Whether the room is made ([`Self::take`] would not wait).
    pub fn is_ready(&self) -> bool {
        self.thread.is_finished()
    }

    /// Waits for the room: each chain's, in order (fewer, or none, if a thread panicked).
    pub fn take(self) -> Vec<(Vec<f64>, Vec<DrawStats>)> {
        self.thread.join().unwrap_or_default()
    }
}

/// One chain's room: empty vectors whose capacity has been written once.
fn written_room(n_columns: usize, draws: usize) -> (Vec<f64>, Vec<DrawStats>) {
    let mut values = Vec::with_capacity(draws * n_columns);
    for value in values.spare_capacity_mut() {
        value.write(0.0);
    }
    let mut stats = Vec::with_capacity(draws);
    for stat in stats.spare_capacity_mut() {
        stat.write(DrawStats::default());
    }
    (values, stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_is_empty_with_the_capacity_asked_for_each_chain() {
        let rooms = Room::make(5, 3, 7).take();
        assert_eq!(rooms.len(), 5);
        for (values, stats) in rooms {
            assert!(values.is_empty() && stats.is_empty());
            assert!(values.capacity() >= 21 && stats.capacity() >= 7);
        }
    }
}

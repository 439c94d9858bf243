//! Flow control: the partitions to pause (hold buffer over its limit) and to resume.

use super::*;

impl<M> Core<M> {
    /// Partitions to pause (hold buffer over the limit) and to resume (halved, or stalled).
    pub fn flow(&mut self, now: Monotonic) -> (Vec<u32>, Vec<u32>) {
        let (mut pause, mut resume) = (Vec::new(), Vec::new());
        let max = self.cfg.max_held;
        for (&p, part) in &mut self.parts {
            let held = part.hold.held();
            if part.paused {
                if held <= max / 2 {
                    part.paused = false;
                    resume.push(p);
                } else if now.saturating_sub(part.quiet_since) >= self.cfg.stall_timeout {
                    // The driver logs it (this layer does no I/O): `take_stalled`.
                    self.stalled.push((p, held));
                    part.paused = false;
                    part.overflow = true;
                    resume.push(p);
                }
            } else if held > max && !part.overflow {
                part.paused = true;
                part.quiet_since = now;
                pause.push(p);
            } else if part.overflow && held <= max / 2 {
                part.overflow = false;
            }
        }
        (pause, resume)
    }

    /// Partitions currently paused by flow control.
    #[cfg(test)]
    pub fn paused(&self) -> Vec<u32> {
        self.parts
            .iter()
            .filter(|(_, p)| p.paused)
            .map(|(&p, _)| p)
            .collect()
    }
}

//! Unit tests of the core state machines.

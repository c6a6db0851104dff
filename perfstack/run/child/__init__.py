"""One run's child process: launched through the bootstrap (``launch``), seen through to its
end whatever the end is (``process``), what it knew of its memory when it did not end
cleanly (``oomfacts``), and the processes it left behind (``strays``)."""

from . import main
from .process_exit import exit_process

if __name__ == "__main__":  # not when a spawned worker process imports the main module again
    exit_process(main())

from . import console

if __name__ == "__main__":  # not when a spawned worker process imports the main module again
    console()

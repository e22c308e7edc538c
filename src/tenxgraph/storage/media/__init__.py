"""Media: fetching and keeping images, audio and files that messages refer to."""

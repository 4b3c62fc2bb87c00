"""omniagent: active perception over long video and audio."""
